"""APT/APF -> WXQuery: the query whose result stream an abstraction describes (paper 002, Sect. 3.3, App. B).

* Structure-preserving APTs (Figure 5): one ``for`` over the items, ``where``
  the disjunction of the output conditions, and the outputs re-enclosed in
  their ancestors' elements (the stream's schema), each group of outputs
  with the same condition under its own ``if``.
* Windowed APTs (Figure 6): the window's pre-selection as the for path's
  predicate, its post-selection as ``where``, one ``let`` per aggregate
  (``AGGELEM`` = function_element, e.g. ``avg_en``), each aggregate returned
  under its selection; window elements under ``win_ITEM``.
* APFs (Figure 15): one ``for`` per input with its window, ``where`` the
  whole pair condition, each input's outputs under an element named after its
  stream, in ``JOINITEM`` (the items' names joined by ``_``) in ``JOINROOT``.

Compiling the generated text gives back an equal abstraction for the
abstractions of queries and of their merges (tested); a window-sharing APF
(no join annotation) is several streams, not one query, and is refused.
"""

from __future__ import annotations

from collections import defaultdict

from .apt import APF, APT, Abstraction
from .paths import is_prefix, split, stream_of, unqualify
from .matching import qualified
from .predicates import DNF, TRUE, disjoin, equivalent

__all__ = ["to_wxquery"]


def to_wxquery(abstraction: Abstraction) -> str:
    """The WXQuery text of ``abstraction``."""
    if isinstance(abstraction, APF):
        return _apf_query(abstraction)
    if abstraction.window is None and not abstraction.aggregates:
        return _preserving(abstraction)
    return _mutating(abstraction)


def _rel(var: str, base: str, path: str) -> str:
    steps = split(path)[len(split(base)):]
    return "$" + var + "".join(f"/{s}" for s in steps)


def _expressions(var: str, item_path: str, outputs: list[str]) -> list[str]:
    """The outputs as expressions: paths, enclosed in their ancestors' constructors below the item (DTD order)."""
    def build(prefix: str, members: list[str]) -> list[str]:
        groups: dict[str, list[str]] = defaultdict(list)
        order: list[str] = []
        for path in members:
            child = prefix + "/" + split(path)[len(split(prefix))]
            if child not in groups:
                order.append(child)
            groups[child].append(path)
        out = []
        for child in order:
            inner = groups[child]
            if child in inner:
                out.append(_rel(var, item_path, child))
            else:
                name = split(child)[-1]
                out.append(f"<{name}>" + "".join(_enclosed(e) for e in build(child, inner)) + f"</{name}>")
        return out
    return build(item_path, outputs)


def _enclosed(expression: str) -> str:
    """An expression as element content: constructors as they are, paths in braces."""
    return expression if expression.startswith("<") else f"{{ {expression} }}"


def _chain(var: str, item_path: str, outputs: list[str], indent: str) -> str:
    return "\n".join(indent + _enclosed(e) for e in _expressions(var, item_path, outputs))


def _preserving(apt: APT, var: str = "v") -> str:
    item = apt.item_path
    outputs = apt.outputs()
    if not outputs:
        raise ValueError("the APT has no output element: it describes an empty stream")
    name = lambda p: _rel(var, item, p)  # noqa: E731 - a path renderer
    where = disjoin(*outputs.values()) if outputs else TRUE
    by_condition: list[tuple[DNF, list[str]]] = []
    for path, cond in outputs.items():
        for entry in by_condition:
            if equivalent(entry[0], cond):
                entry[1].append(path)
                break
        else:
            by_condition.append((cond, [path]))
    body: list[str] = []
    for cond, paths in by_condition:
        chain = _chain(var, item, paths, "        ")
        if equivalent(cond, where):
            body.append(chain)
        else:
            parts = ", ".join(_expressions(var, item, paths))
            body.append(f"        {{ if ({cond.render(name)}) then ({parts}) else () }}")
    clause = "" if where.is_true else f"\n    where {where.render(name)}"
    return (f"<{apt.root}>\n  {{ for ${var} in stream(\"{apt.stream}\")/{apt.root}/{apt.item}{clause}\n"
            f"    return\n      <{apt.item}>\n" + "\n".join(body) + f"\n      </{apt.item}> }}\n</{apt.root}>")


def _mutating(apt: APT, var: str = "w") -> str:
    item = apt.item_path
    window = apt.window
    if window is None:
        raise ValueError("an APT with aggregates but no window has no WXQuery form in the subset")
    name = lambda p: _rel(var, item, p)  # noqa: E731 - a path renderer
    lets: list[str] = []
    agg_var: dict[str, str] = {}
    for i, agg in enumerate(apt.aggregates, 1):
        agg_var[agg.key] = f"$a{i}"
        lets.append(f"  let $a{i} := {agg.function}({_argument(var, item, agg.path, agg.pre)})")
    value = lambda p: agg_var.get(p, name(p))  # noqa: E731
    pre = "" if window.pre.is_true else f"[{window.pre.render(lambda p: _rel_self(item, p))}]"
    spec = (f"|count {window.size} step {window.step}|" if window.kind == "count" else
            f"|{_rel_self(item, window.reference)} diff {window.size} step {window.step}|")
    parts: list[str] = []
    conditions: list[DNF] = []
    for agg in apt.aggregates:
        if not agg.output:
            continue
        tag = f"{agg.function}_{split(agg.path)[-1]}"
        elem = f"<{tag}> {{ {agg_var[agg.key]} }} </{tag}>"
        conditions.append(agg.selection)
        parts.append(elem if agg.selection.is_true else f"{{ if ({agg.selection.render(value)}) then {elem} else () }}")
    windowed = list(apt.outputs())
    if windowed:
        conditions.append(TRUE)
        parts.append(f"<win_{apt.item}>\n" + _chain(var, item, windowed, "          ")
                     + f"\n        </win_{apt.item}>")
    guard = disjoin(*conditions) if conditions else TRUE
    result = f"<{apt.item}>\n        " + "\n        ".join(parts) + f"\n      </{apt.item}>"
    if not guard.is_true:
        result = f"if ({guard.render(value)}) then\n      {result}\n      else ()"
    where = "" if window.post.is_true else f"\n  where {window.post.render(name)}"
    return (f"<{apt.root}>\n{{ for ${var} in stream(\"{apt.stream}\")/{apt.root}/{apt.item}{pre}\n  {spec}\n"
            + "\n".join(lets) + f"{where}\n  return\n      {result} }}\n</{apt.root}>")


def _rel_self(base: str, path: str) -> str:
    """``path`` relative to ``base`` as a predicate writes it (``.`` for ``base`` itself)."""
    steps = split(path)[len(split(base)):]
    return "/".join(steps) or "."


def _argument(var: str, item: str, path: str, pre: DNF) -> str:
    """An aggregate's argument with its pre-selection on the deepest step above every path it reads."""
    if pre.is_true:
        return _rel(var, item, path) if path != item else f"${var}"
    anchor = path
    while not all(is_prefix(anchor, p) for p in pre.paths()):
        anchor = "/" + "/".join(split(anchor)[:-1])
    if anchor == item:
        raise ValueError(f"the pre-selection of an aggregate over {path} reads elements beside it; "
                         "the subset has no predicate on the window variable itself")
    predicate = pre.render(lambda p: _rel_self(anchor, p))
    rest = split(path)[len(split(anchor)):]
    return _rel(var, item, anchor) + f"[{predicate}]" + "".join(f"/{s}" for s in rest)


def _apf_query(apf: APF) -> str:
    if apf.join is None:
        raise ValueError("a window-sharing APF (no join annotation) is one stream per input, not one query")
    variables = {t.stream: f"x{i + 1}" for i, t in enumerate(apf.trees)}
    items = {t.stream: t.item_path for t in apf.trees}

    def name(path: str) -> str:
        stream = stream_of(path)
        return _rel(variables[stream], items[stream], unqualify(path))
    fors = []
    for t in apf.trees:
        w = t.window
        pre = "" if w.pre.is_true else f"[{w.pre.render(lambda p, b=t.item_path: _rel_self(b, p))}]"
        spec = (f"|count {w.size} step {w.step}|" if w.kind == "count" else
                f"|{_rel_self(t.item_path, w.reference)} diff {w.size} step {w.step}|")
        fors.append(f"  for ${variables[t.stream]} in stream(\"{t.stream}\")/{t.root}/{t.item}{pre} {spec}")
    parts = [qualified(t.tree.children[0].selection, t.stream) for t in apf.trees
             if t.tree.children[0].selection is not None and not t.tree.children[0].selection.is_true]
    parts += [] if apf.join.predicate.is_true else [apf.join.predicate]
    where = "" if not parts else "\n  where " + " and ".join(f"({p.render(name)})" for p in parts)
    blocks = []
    for t in apf.trees:
        chain = _chain(variables[t.stream], t.item_path, list(t.outputs()), "          ")
        blocks.append(f"        <{t.stream}>\n{chain}\n        </{t.stream}>")
    root = "_".join(t.root for t in apf.trees)
    item = "_".join(t.item for t in apf.trees)
    return (f"<{root}>\n{{\n" + "\n".join(fors) + f"{where}\n  return\n      <{item}>\n" + "\n".join(blocks)
            + f"\n      </{item}> }}\n</{root}>")
