"""Evaluate a subscription's ``return`` expression for one binding: element construction and conditionals.

A binding maps the query's variables to an item element, a window (a list of
item elements), an aggregate value (a number, or None for the empty
sequence) or an element below an item (nested ``for``). The result is a list
of result items, each an lxml element (constructed, or a copy of an input
element) or an atomic value; :func:`serialize` writes one as text.

Numbers print as XQuery prints an ``xs:double``: integral values without a
fraction, others in the shortest form that reads back the same, exponent
notation outside [1e-6, 1e6).
"""

from __future__ import annotations

import copy
from decimal import Decimal
from functools import lru_cache
from typing import Any, Callable, Iterable, Mapping

from lxml import etree

from .paths import split, stream_of
from .predicates import DNF, Atom, Dim, atom_holds, evaluate
from .syntax import FLWR, Element, Expr, IfExpr, PathExpr, Sequence, VarRef
from .translate import Subscription

__all__ = ["Binding", "ItemValues", "construct", "serialize", "format_number", "child_path"]

Binding = Mapping[str, Any]
Result = etree._Element | float | int | str


def format_number(value: float | int) -> str:
    """``value`` as XQuery serializes an ``xs:double`` (``xs:integer`` for ints)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if value != value:
        return "NaN"
    if value in (float("inf"), float("-inf")):
        return "INF" if value > 0 else "-INF"
    if value == 0:
        return "0"
    if 1e-6 <= abs(value) < 1e6:
        text = repr(value)
        return text[:-2] if text.endswith(".0") else text
    exact = Decimal(repr(value)).normalize()
    sign, digits, _ = exact.as_tuple()
    figures = "".join(map(str, digits))
    return f"{'-' if sign else ''}{figures[0]}.{figures[1:] or '0'}E{exact.adjusted()}"


def serialize(result: Result) -> str:
    """One result item as text (elements as XML)."""
    if isinstance(result, etree._Element):
        return etree.tostring(result, encoding="unicode")
    if isinstance(result, (int, float)):
        return format_number(result)
    return str(result)


def child_path(element: etree._Element, steps: Iterable[str]) -> list[etree._Element]:
    """The elements reached from ``element`` by child steps, in document order."""
    level = [element]
    for step in steps:
        level = [c for e in level for c in e if c.tag == step]
    return level


@lru_cache(maxsize=4096)
def _locate(path: str, depth: int) -> tuple[str | None, tuple[str, ...]]:
    """The stream of a (possibly qualified) path and its steps below the item."""
    return stream_of(path), split(path)[depth:]


def _texts(item: etree._Element) -> dict[tuple[str, ...], str]:
    """The text of every element of an item by its steps below the item (the first one of a repeated path)."""
    table: dict[tuple[str, ...], str] = {}

    def walk(element: etree._Element, steps: tuple[str, ...]) -> None:
        for child in element:
            if isinstance(child.tag, str):
                here = steps + (child.tag,)
                if here not in table:
                    table[here] = child.text or ""
                walk(child, here)
    walk(item, ())
    return table


class ItemValues:
    """The values of an item's compared elements, as numbers or strings, read once per item.

    One instance per item can serve every subscription that reads the item
    (the shared parsing of a group); comparisons are remembered too.
    Raises ``ValueError`` for a number that does not parse: runs check the
    numeric elements of every item up front (:mod:`streaming.wxquery.run`).
    """

    def __init__(self, items: Mapping[str | None, etree._Element], item_depth: int = 2):
        self.items = items
        self.depth = item_depth
        self._tables: dict[str | None, dict[tuple[str, ...], str]] = {}
        self._cache: dict[Dim, Any] = {}
        self._truth: dict[tuple, bool] = {}

    def _text(self, path: str) -> str | None:
        stream, steps = _locate(path, self.depth)
        table = self._tables.get(stream)
        if table is None:
            item = self.items.get(stream)
            if item is None:
                return None
            table = self._tables[stream] = _texts(item)
        return table.get(steps)

    def __call__(self, dim: Dim) -> Any:
        if dim in self._cache:
            return self._cache[dim]
        path, minus, kind = dim
        text = self._text(path)
        value: Any
        if text is None:
            value = None
        elif kind == "string":
            value = text
        else:
            value = float(text)
            if minus is not None:
                other = self._text(minus)
                value = None if other is None else value - float(other)
        self._cache[dim] = value
        return value

    def atom(self, atom: Atom) -> bool:
        """Whether one comparison holds for the item (evaluated once per item)."""
        key = (atom.path, atom.minus, atom.op, atom.value)
        known = self._truth.get(key)
        if known is None:
            known = self._truth[key] = atom_holds(atom, self)
        return known

    def holds(self, predicate: DNF) -> bool:
        """Whether ``predicate`` holds for the item."""
        return any(all(self.atom(a) for a in conj) for conj in predicate.any_of)


def construct(sub: Subscription, binding: Binding, values: Callable[[Dim], Any]) -> list[Result]:
    """The result items of ``sub``'s return expression under ``binding``."""
    return _Builder(sub, binding, values).eval(sub.result)


class _Builder:
    def __init__(self, sub: Subscription, binding: Binding, values: Callable[[Dim], Any]):
        self.sub = sub
        self.env = dict(binding)
        self.values = values
        self.lets = {let.var: let for let in sub.lets}

    def eval(self, expr: Expr) -> list[Result]:
        if isinstance(expr, Element):
            out = etree.Element(expr.tag)
            pending: list[str] = []
            for child in expr.content:
                for item in self.eval(child):
                    if isinstance(item, etree._Element):
                        _flush(out, pending)
                        out.append(item)
                    else:
                        pending.append(serialize(item))
            _flush(out, pending)
            return [out]
        if isinstance(expr, Sequence):
            return [r for item in expr.items for r in self.eval(item)]
        if isinstance(expr, IfExpr):
            taken = expr.then if self._holds(self.sub.condition(expr.cond)) else expr.orelse
            return self.eval(taken)
        if isinstance(expr, VarRef):
            value = self.env[expr.name]
            if isinstance(value, etree._Element):
                return [copy.deepcopy(value)]
            if isinstance(value, list):
                return [copy.deepcopy(v) for v in value]
            return [] if value is None else [value]
        if isinstance(expr, PathExpr):
            return [copy.deepcopy(e) for e in self._select(expr)]
        if isinstance(expr, FLWR):
            (clause,) = expr.clauses
            out: list[Result] = []
            for element in self._select(clause.source):
                self.env[clause.var] = element
                out += self.eval(expr.result)
            self.env.pop(clause.var, None)
            return out
        raise TypeError(f"cannot evaluate {type(expr).__name__}")  # pragma: no cover

    def _select(self, path: PathExpr) -> list[etree._Element]:
        bound = self.env[path.base.name]
        roots = bound if isinstance(bound, list) else [bound]
        steps = tuple(s.name for s in path.steps)
        return [e for root in roots for e in child_path(root, steps)]

    def _holds(self, predicate: DNF) -> bool:
        return evaluate(predicate, self._value)

    def _value(self, dim: Dim) -> Any:
        path = dim[0]
        if "(" in path and not path.startswith("stream("):
            return next((self.env[v] for v, let in self.lets.items() if let.aggregate.key == path), None)
        return self.values(dim)


def _flush(parent: etree._Element, pending: list[str]) -> None:
    """Adjacent atomic values become one text node, separated by spaces (XQuery element content)."""
    if not pending:
        return
    text = " ".join(pending)
    pending.clear()
    if len(parent):
        parent[-1].tail = (parent[-1].tail or "") + text
    else:
        parent.text = (parent.text or "") + text
