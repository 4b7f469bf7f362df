"""Abstract property trees and forests (paper 002, Definitions 3.2 and 5.1), as frozen pydantic models.

An :class:`APT` is a path tree in DTD order whose nodes carry the paper's
annotations: ``output`` (the bullet of an output element), ``selection``
(σ: the condition under which the output elements at or below the node are
returned, pulled up to the highest node that all of them share),
``window`` (ω, with its pre- and post-selection) on the window's item element
and ``aggregates`` (γ, with its pre-selection, its selection σ on the value
and its output marker) on the aggregated element. An :class:`APF` is one APT
per input stream and a join annotation (⋈) over stream-qualified paths.

The models round-trip through JSON (``model_dump_json`` /
``model_validate_json``). :meth:`APT.outputs` gives the flat view the
matching works on: each output path with its own condition.
"""

from __future__ import annotations

from typing import Iterator, Literal, Union

from pydantic import BaseModel, ConfigDict, Field

from ..xmlstream.dtd import StreamDTD
from .paths import absolute, is_prefix, split
from .predicates import DNF, TRUE, implies, normalize

__all__ = ["Window", "Aggregate", "PathNode", "APT", "JoinAnnotation", "APF", "Abstraction", "build_apt"]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Window(_Frozen):
    """ω: a count window over the item elements, or a time window over the reference element's values."""

    kind: Literal["count", "time"]
    reference: str | None = None
    size: int = Field(gt=0)
    step: int = Field(gt=0)
    pre: DNF = TRUE
    post: DNF = TRUE

    def label(self) -> str:
        ref = f"{self.reference} diff" if self.kind == "time" else "count"
        return f"|{ref} {self.size} step {self.step}|"


class Aggregate(_Frozen):
    """γ: ``function`` over the values of ``path`` (the item itself for ``count``) passing ``pre``."""

    function: Literal["min", "max", "sum", "count", "avg"]
    path: str
    pre: DNF = TRUE
    selection: DNF = TRUE
    output: bool = True

    @property
    def key(self) -> str:
        """How conditions name this value: ``avg(/photons/photon/en)``."""
        return f"{self.function}({self.source})"

    @property
    def source(self) -> str:
        """The aggregated values: the path and its pre-selection (aggregates of one source share partials)."""
        return self.path if self.pre.is_true else f"{self.path}[{self.pre}]"


class PathNode(_Frozen):
    """One element of the path tree with its annotations; ``selection`` None means inherited."""

    name: str
    output: bool = False
    selection: DNF | None = None
    window: Window | None = None
    aggregates: tuple[Aggregate, ...] = ()
    children: tuple["PathNode", ...] = ()


class APT(_Frozen):
    """The abstraction of a single-input query or stream: ``t = (P, A, O, id, d)``."""

    type: Literal["apt"] = "apt"
    stream: str
    root: str
    item: str
    tree: PathNode

    @property
    def item_path(self) -> str:
        return absolute((self.root, self.item))

    def nodes(self) -> Iterator[tuple[str, PathNode, DNF]]:
        """Every node as (path, node, the selection in force there), parents first."""
        def walk(node: PathNode, prefix: str, inherited: DNF) -> Iterator[tuple[str, PathNode, DNF]]:
            path = f"{prefix}/{node.name}"
            here = node.selection if node.selection is not None else inherited
            yield path, node, here
            for child in node.children:
                yield from walk(child, path, here)
        return walk(self.tree, "", TRUE)

    def paths(self) -> list[str]:
        """The referenced paths P (every node of the path tree)."""
        return [path for path, _, _ in self.nodes()]

    def outputs(self) -> dict[str, DNF]:
        """The output elements O with the condition under which each is returned."""
        return {path: cond for path, node, cond in self.nodes() if node.output}

    @property
    def window(self) -> Window | None:
        return next((node.window for _, node, _ in self.nodes() if node.window is not None), None)

    @property
    def aggregates(self) -> tuple[Aggregate, ...]:
        return tuple(a for _, node, _ in self.nodes() for a in node.aggregates)

    @property
    def structure_preserving(self) -> bool:
        """Selection and projection only (no window, no aggregate): Sect. 3.3.1."""
        return self.window is None and not self.aggregates


class JoinAnnotation(_Frozen):
    """⋈: the join predicate over stream-qualified paths, and the returned elements it guards."""

    predicate: DNF
    parents: tuple[str, ...] = ()


class APF(_Frozen):
    """The abstraction of a join query: one APT per input, and the join annotation.

    ``join`` is None for a stream of windows shared by join queries with
    different steps (selective window sharing): each joins on its own.
    """

    type: Literal["apf"] = "apf"
    trees: tuple[APT, ...]
    join: JoinAnnotation | None


Abstraction = Union[APT, APF]


def build_apt(stream: str, dtd: StreamDTD, paths: set[str], outputs: dict[str, DNF],
              window: Window | None = None, aggregates: tuple[Aggregate, ...] = ()) -> APT:
    """Assemble the path tree (DTD order) and pull selections up (Sect. 3.2.1-3.2.2).

    An output below another output whose condition it implies is implicit
    (Sect. 4.1) and dropped, and so is any other path below an output (it is
    in the output's subtree); conditions are normalised so equal conditions
    are equal models.
    """
    conds = {p: normalize(c) for p, c in outputs.items() if not c.is_false}
    kept = {p: c for p, c in conds.items()
            if not any(a != p and is_prefix(a, p) and implies(c, conds[a]) for a in conds)}
    annotated = {a.path for a in aggregates} | ({window.reference} if window and window.reference else set())
    implicit = {p for p in paths if p not in annotated and any(a != p and is_prefix(a, p) for a in kept)}
    every = (set(paths) - implicit) | set(kept) | annotated | {absolute((dtd.root, dtd.item))}
    every |= {absolute(split(p)[:i]) for p in every for i in range(1, len(split(p)))}
    item_depth = 2

    def subtree_conds(path: str) -> list[DNF]:
        return [c for p, c in kept.items() if is_prefix(path, p)]

    def build(path: str, inherited: DNF) -> PathNode:
        steps = split(path)
        below = subtree_conds(path)
        selection: DNF | None = None
        uniform = below and all(c == below[0] for c in below)
        if uniform and len(steps) >= item_depth:
            if below[0] != inherited:
                selection = below[0]
        elif path in kept and kept[path] != inherited:
            selection = kept[path]
        here = selection if selection is not None else inherited
        kids = sorted((p for p in every if len(split(p)) == len(steps) + 1 and is_prefix(path, p)),
                      key=lambda p: dtd.order_key(split(p)))
        return PathNode(
            name=steps[-1],
            output=path in kept,
            selection=selection,
            window=window if window is not None and len(steps) == item_depth else None,
            aggregates=tuple(a for a in aggregates if a.path == path),
            children=tuple(build(k, here) for k in kids),
        )

    return APT(stream=stream, root=dtd.root, item=dtd.item, tree=build(absolute((dtd.root,)), TRUE))
