"""Matching and merging of APTs and APFs (paper 002, Sect. 4 and 5.3), and narrowing.

``matches(stream, query)`` is the containment check: the stream described by
``stream`` already holds everything ``query`` needs, so the query is
answered from it by post-processing alone. ``merge(stream, query)`` widens
the stream: the result describes a stream from which both are answered.

* Path trees (4.1): every output of the query must be present in the stream
  under a condition its own implies (an output ancestor covers its subtree).
* Selections (4.2): implication for matching, the union for merging; an
  output without a selection in either removes the selection.
* Windows and aggregates (4.2, 4.3): same item, kind and reference element,
  equivalent pre- and post-selections; the stream window must serve the
  query's (``serves``); merging relaxes both with RELAXWINDOW. Aggregates are
  kept per source (path and pre-selection): one set of partials gives every
  function, so aggregates of different functions are all kept. Otherwise the
  window and aggregates are removed and the merged APT is the items stream
  that both queries compute their windows from (the q3/q1 case of Sect. 4.4).
* Joins (5.3.2): equal windows: full join-result sharing; equal steps:
  selective join-result sharing over the larger sizes (SELECTJOINRESULT);
  different steps: selective window sharing over relaxed windows
  (SELECTWINDOWS), the merged APF has no join annotation.
"""

from __future__ import annotations

from typing import Callable, Literal, Mapping, Sequence

from ..sharing.windows import relax_window, serves
from ..xmlstream.dtd import StreamDTD
from .apt import APF, APT, Abstraction, Aggregate, JoinAnnotation, Window, build_apt
from .paths import is_prefix, qualify
from .predicates import DNF, FALSE, TRUE, conjoin, disjoin, equivalent, implies, normalize

__all__ = [
    "Shape",
    "shape",
    "item_demand",
    "presence",
    "matches",
    "merge",
    "match_or_merge",
    "narrow",
    "same_abstraction",
    "join_case",
    "pair_condition",
    "relax_join_windows",
    "qualified",
]

Shape = Literal["items", "aggregates", "window-items", "join", "windows"]
DTDs = Mapping[str, StreamDTD] | Callable[[str], StreamDTD | None]


def _dtd(dtds: DTDs, stream: str) -> StreamDTD:
    found = dtds(stream) if callable(dtds) else dtds.get(stream)
    if found is None:
        raise KeyError(f"no DTD for stream {stream!r}")
    return found


def shape(a: Abstraction) -> Shape:
    """What kind of stream an abstraction describes, for sharing."""
    if isinstance(a, APF):
        return "join" if a.join is not None else "windows"
    if a.structure_preserving:
        return "items"
    if a.window is not None and a.aggregates and not a.outputs():
        return "aggregates"
    return "window-items"


def presence(apt: APT, path: str) -> DNF:
    """The condition under which ``path`` is in the stream (output itself or below an output)."""
    return disjoin(FALSE, *(c for p, c in apt.outputs().items() if is_prefix(p, path)))


def item_demand(apt: APT, dtds: DTDs) -> APT:
    """The items stream a query needs: itself if structure-preserving, else its window and aggregates removed.

    The window's pre-selection becomes the item's selection and every leaf of
    the path tree an output (paper Sect. 4.4, q3 with q1): from that stream a
    subscriber builds its own windows.
    """
    if apt.structure_preserving:
        return apt
    window = apt.window
    pre = window.pre if window is not None else TRUE
    paths = apt.paths()
    leaves = {p for p in paths if not any(q != p and is_prefix(p, q) for q in paths)}
    outputs = {p: pre for p in leaves | set(apt.outputs())}
    return build_apt(apt.stream, _dtd(dtds, apt.stream), set(paths), outputs)


# -- APTs -----------------------------------------------------------------------------------------

def _same_input(a: APT, b: APT) -> bool:
    return (a.stream, a.root, a.item) == (b.stream, b.root, b.item)


def _windows_compatible(a: Window, b: Window) -> bool:
    return (a.kind == b.kind and a.reference == b.reference and equivalent(a.pre, b.pre)
            and equivalent(a.post, b.post))


def _items_match(stream: APT, query: APT) -> bool:
    return all(implies(cond, presence(stream, path)) for path, cond in query.outputs().items())


def _aggregates_match(stream: APT, query: APT) -> bool:
    sw, qw = stream.window, query.window
    if sw is None or qw is None or not _windows_compatible(sw, qw):
        return False
    if not serves((sw.size, sw.step), (qw.size, qw.step)):
        return False
    have = {a.key: a for a in stream.aggregates}
    for agg in query.aggregates:
        mine = have.get(agg.key)
        if mine is None or not implies(agg.selection, mine.selection):
            return False
    return True


def matches(stream: Abstraction, query: Abstraction, dtds: DTDs | None = None) -> bool:
    """Whether the stream described by ``stream`` answers ``query`` without widening."""
    if isinstance(stream, APF) or isinstance(query, APF):
        return isinstance(stream, APF) and isinstance(query, APF) and _apf_matches(stream, query)
    if not _same_input(stream, query):
        return False
    kind = shape(stream)
    if kind == "aggregates":
        return shape(query) == "aggregates" and _aggregates_match(stream, query)
    if kind != "items":
        return False
    if query.structure_preserving:
        return _items_match(stream, query)
    if dtds is None:
        raise ValueError("matching a windowed query against an items stream needs the stream DTDs")
    return _items_match(stream, item_demand(query, dtds))


def _merge_outputs(*apts: APT) -> dict[str, DNF]:
    out: dict[str, DNF] = {}
    for apt in apts:
        for path, cond in apt.outputs().items():
            out[path] = disjoin(out[path], cond) if path in out else cond
    return out


def _merge_apts(stream: APT, query: APT, dtds: DTDs) -> APT:
    dtd = _dtd(dtds, stream.stream)
    paths = set(stream.paths()) | set(query.paths())
    sw, qw = stream.window, query.window
    if (shape(stream) == "aggregates" and shape(query) == "aggregates" and sw is not None and qw is not None
            and _windows_compatible(sw, qw)):
        size, step = relax_window([(sw.size, sw.step), (qw.size, qw.step)])
        window = sw.model_copy(update={"size": size, "step": step, "post": sw.post})
        merged: dict[str, Aggregate] = {}
        for agg in stream.aggregates + query.aggregates:
            if agg.key in merged:
                old = merged[agg.key]
                agg = old.model_copy(update={"selection": disjoin(old.selection, agg.selection),
                                             "output": old.output or agg.output})
            merged[agg.key] = agg
        return build_apt(stream.stream, dtd, paths, {}, window=window, aggregates=tuple(merged.values()))
    left, right = item_demand(stream, dtds), item_demand(query, dtds)
    paths = set(left.paths()) | set(right.paths())
    return build_apt(stream.stream, dtd, paths, _merge_outputs(left, right))


def merge(stream: Abstraction, query: Abstraction, dtds: DTDs) -> Abstraction | None:
    """The widened abstraction answering both, or None if they read different inputs."""
    if isinstance(stream, APF) or isinstance(query, APF):
        if isinstance(stream, APF) and isinstance(query, APF):
            return _apf_merge(stream, query, dtds)
        return None
    if not _same_input(stream, query):
        return None
    return _merge_apts(stream, query, dtds)


def match_or_merge(stream: Abstraction, query: Abstraction, dtds: DTDs) -> tuple[bool, Abstraction | None]:
    """The paper's combined operation: ``(True, stream)`` on a match, else ``(False, merged or None)``."""
    if matches(stream, query, dtds):
        return True, stream
    return False, merge(stream, query, dtds)


def narrow(members: Sequence[Abstraction], dtds: DTDs) -> Abstraction:
    """Data stream narrowing: the merge of the members that remain (in their registration order)."""
    if not members:
        raise ValueError("narrowing needs at least one remaining member")
    current = members[0] if shape(members[0]) != "window-items" else item_demand(members[0], dtds)
    for member in members[1:]:
        if matches(current, member, dtds):
            continue
        merged = merge(current, member, dtds)
        if merged is None:
            raise ValueError("the members of a group read different inputs")
        current = merged
    return current


def same_abstraction(a: Abstraction, b: Abstraction) -> bool:
    """Semantic equality: same paths and outputs, equivalent conditions, same windows and aggregates."""
    if isinstance(a, APF) or isinstance(b, APF):
        if not (isinstance(a, APF) and isinstance(b, APF)) or len(a.trees) != len(b.trees):
            return False
        if (a.join is None) != (b.join is None):
            return False
        if a.join is not None and not equivalent(a.join.predicate, b.join.predicate):
            return False
        return all(same_abstraction(x, y) for x, y in zip(a.trees, b.trees))
    if not _same_input(a, b) or _essential(a) != _essential(b):
        return False
    ao, bo = a.outputs(), b.outputs()
    if set(ao) != set(bo) or not all(equivalent(ao[p], bo[p]) for p in ao):
        return False
    aw, bw = a.window, b.window
    if (aw is None) != (bw is None):
        return False
    if aw is not None and (not _windows_compatible(aw, bw) or (aw.size, aw.step) != (bw.size, bw.step)):
        return False
    ag = {g.key: g for g in a.aggregates}
    bg = {g.key: g for g in b.aggregates}
    return set(ag) == set(bg) and all(
        equivalent(ag[k].selection, bg[k].selection) and ag[k].output == bg[k].output for k in ag)


def _essential(apt: APT) -> set[str]:
    """The paths an APT's stream depends on: outputs, aggregated and reference elements, predicate paths.

    Other nodes of the path tree are references the query made that its
    conditions do not depend on (``a < 0 or (a < 0 and b < 0)`` reads ``b``,
    ``a < 0 or a >= 0`` reads ``a``, and neither depends on it).
    """
    out = set(apt.outputs())
    window = apt.window
    predicates = [c for _, node, c in apt.nodes() if node.selection is not None]
    if window is not None:
        out |= {window.reference} if window.reference else set()
        predicates += [window.pre, window.post]
    for agg in apt.aggregates:
        out.add(agg.path)
        predicates += [agg.pre]
    for predicate in predicates:
        out |= {p for p in predicate.paths() if "(" not in p and _decides(predicate, p)}
    return out


def _decides(predicate: DNF, path: str) -> bool:
    """Whether ``path``'s value can change ``predicate``: dropping its atoms from every satisfiable
    conjunction (projecting the path away) gives an inequivalent predicate."""
    projected = DNF(any_of=tuple(tuple(a for a in conj if path not in (a.path, a.minus))
                                 for conj in normalize(predicate).any_of))
    return not equivalent(projected, predicate)


# -- APFs -----------------------------------------------------------------------------------------

def pair_condition(apf: APF) -> DNF:
    """The whole pair condition: every tree's selection (stream-qualified) and the join annotation."""
    parts = [apf.join.predicate] if apf.join is not None else []
    for tree in apf.trees:
        node_sel = tree.tree.children[0].selection if tree.tree.children else None
        if node_sel is not None:
            parts.append(qualified(node_sel, tree.stream))
    return conjoin(TRUE, *parts)


def qualified(predicate: DNF, stream: str) -> DNF:
    """``predicate`` with its paths qualified by ``stream`` (for pair conditions)."""
    return DNF(any_of=tuple(tuple(a.model_copy(update={
        "path": qualify(stream, a.path), "minus": qualify(stream, a.minus) if a.minus else None})
        for a in conj) for conj in predicate.any_of))


def _inputs_compatible(stream: APF, query: APF) -> bool:
    if [t.stream for t in stream.trees] != [t.stream for t in query.trees]:
        return False
    for s, q in zip(stream.trees, query.trees):
        sw, qw = s.window, q.window
        if not _same_input(s, q) or sw is None or qw is None:
            return False
        if sw.kind != qw.kind or sw.reference != qw.reference or not equivalent(sw.pre, qw.pre):
            return False
    return True


def _paths_within(stream: APF, query: APF) -> bool:
    return all(set(q.paths()) <= set(s.paths()) for s, q in zip(stream.trees, query.trees))


def join_case(stream: APF, query: APF) -> Literal["full", "selective", "windows"]:
    """Which case of Sect. 5.3.2 two join abstractions fall in, by their windows."""
    pairs = [(s.window, q.window) for s, q in zip(stream.trees, query.trees)]
    if all((s.size, s.step) == (q.size, q.step) for s, q in pairs):
        return "full"
    if all(s.step == q.step for s, q in pairs):
        return "selective"
    return "windows"


def _apf_matches(stream: APF, query: APF) -> bool:
    if query.join is None or not _inputs_compatible(stream, query) or not _paths_within(stream, query):
        return False
    if stream.join is None:
        return all(serves((s.window.size, s.window.step), (q.window.size, q.window.step))
                   for s, q in zip(stream.trees, query.trees))
    if join_case(stream, query) == "windows":
        return False
    if any(s.window.size < q.window.size for s, q in zip(stream.trees, query.trees)):
        return False
    return implies(pair_condition(query), pair_condition(stream))


def _apf_merge(stream: APF, query: APF, dtds: DTDs) -> APF | None:
    if not _inputs_compatible(stream, query):
        return None
    windows_only = stream.join is None or query.join is None or join_case(stream, query) == "windows"
    trees = []
    for s, q in zip(stream.trees, query.trees):
        sw, qw = s.window, q.window
        if windows_only:
            size, step = relax_window([(sw.size, sw.step), (qw.size, qw.step)])
        else:
            size, step = max(sw.size, qw.size), sw.step
        window = sw.model_copy(update={"size": size, "step": step})
        outputs = {p: TRUE for p in set(s.outputs()) | set(q.outputs())}
        paths = set(s.paths()) | set(q.paths())
        tree = build_apt(s.stream, _dtd(dtds, s.stream), paths, outputs, window=window)
        trees.append(tree)
    if windows_only:
        return APF(trees=tuple(trees), join=None)
    relaxed = disjoin(pair_condition(stream), pair_condition(query))
    parents = tuple(sorted(set(stream.join.parents) | set(query.join.parents)))
    return APF(trees=tuple(trees), join=JoinAnnotation(predicate=relaxed, parents=parents))


def relax_join_windows(apf: APF, members: Sequence[APF]) -> APF:
    """A window-sharing APF whose relaxed windows divide every member's windows (RELAXWINDOW over all).

    Merging two APFs sees only the group's windows, which after selective
    join sharing are the largest sizes, not each member's; the relaxed
    windows must combine into every member's own.
    """
    if apf.join is not None:
        return apf
    trees = []
    for i, tree in enumerate(apf.trees):
        windows = [(m.trees[i].window.size, m.trees[i].window.step) for m in members]
        size, step = relax_window(windows + [(tree.window.size, tree.window.step)])
        window = tree.window.model_copy(update={"size": size, "step": step})
        trees.append(_with_window(tree, window))
    return apf.model_copy(update={"trees": tuple(trees)})


def _with_window(apt: APT, window: Window) -> APT:
    item = apt.tree.children[0].model_copy(update={"window": window})
    return apt.model_copy(update={"tree": apt.tree.model_copy(update={"children": (item,)})})
