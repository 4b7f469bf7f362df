"""The syntax tree of a WXQuery subscription (paper 002, Definition 2.1).

Every node carries the position (line, column, 1-based) of its first token, so
the translator can name the place of anything the supported subset refuses.
Nodes are plain frozen dataclasses: the parser builds them, the translator and
the evaluator read them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Union

__all__ = [
    "Pos",
    "Step",
    "StreamRef",
    "VarRef",
    "SelfRef",
    "PathExpr",
    "Literal",
    "Shifted",
    "Comparison",
    "And",
    "Or",
    "Cond",
    "Operand",
    "Element",
    "IfExpr",
    "Sequence",
    "CountWindow",
    "TimeWindow",
    "ForClause",
    "LetClause",
    "FLWR",
    "Expr",
    "AGGREGATE_FUNCTIONS",
    "COMPARISONS",
]

AGGREGATE_FUNCTIONS = ("min", "max", "sum", "count", "avg")
COMPARISONS = ("=", "!=", "<", "<=", ">", ">=")


@dataclass(frozen=True, slots=True)
class Pos:
    """Where a node starts in the query text (1-based line and column)."""

    line: int
    column: int

    def __str__(self) -> str:
        return f"line {self.line}, column {self.column}"


@dataclass(frozen=True, slots=True)
class Step:
    """One child step ``/name[cond]...`` of a path."""

    name: str
    predicates: tuple["Cond", ...] = ()
    pos: Pos = field(default=Pos(0, 0), compare=False)


@dataclass(frozen=True, slots=True)
class StreamRef:
    """``stream("id")``: the stream node of a registered data stream."""

    stream: str
    pos: Pos = field(default=Pos(0, 0), compare=False)


@dataclass(frozen=True, slots=True)
class VarRef:
    """``$name``: a variable bound by ``for`` or ``let``."""

    name: str
    pos: Pos = field(default=Pos(0, 0), compare=False)


@dataclass(frozen=True, slots=True)
class SelfRef:
    """``.``: the context element of a predicate."""

    pos: Pos = field(default=Pos(0, 0), compare=False)


@dataclass(frozen=True, slots=True)
class PathExpr:
    """A path: a base (stream, variable, context element, or none for a relative path) and child steps."""

    base: StreamRef | VarRef | SelfRef | None
    steps: tuple[Step, ...]
    absolute: bool = False
    pos: Pos = field(default=Pos(0, 0), compare=False)


@dataclass(frozen=True, slots=True)
class Literal:
    """A number or a string constant."""

    value: float | str
    pos: Pos = field(default=Pos(0, 0), compare=False)


@dataclass(frozen=True, slots=True)
class Shifted:
    """``path + c`` or ``path - c`` (``delta`` is signed): the arithmetic join conditions use."""

    path: PathExpr
    delta: float
    pos: Pos = field(default=Pos(0, 0), compare=False)


Operand = Union[PathExpr, VarRef, Literal, Shifted]


@dataclass(frozen=True, slots=True)
class Comparison:
    """A general comparison ``left op right`` (existential over sequences, as in XQuery)."""

    left: Operand
    op: str
    right: Operand
    pos: Pos = field(default=Pos(0, 0), compare=False)


@dataclass(frozen=True, slots=True)
class And:
    items: tuple["Cond", ...]
    pos: Pos = field(default=Pos(0, 0), compare=False)


@dataclass(frozen=True, slots=True)
class Or:
    items: tuple["Cond", ...]
    pos: Pos = field(default=Pos(0, 0), compare=False)


Cond = Union[Comparison, And, Or]


@dataclass(frozen=True, slots=True)
class Element:
    """A direct element constructor ``<t>...</t>`` (``<t/>``: no content)."""

    tag: str
    content: tuple["Expr", ...]
    pos: Pos = field(default=Pos(0, 0), compare=False)


@dataclass(frozen=True, slots=True)
class IfExpr:
    cond: Cond
    then: "Expr"
    orelse: "Expr"
    pos: Pos = field(default=Pos(0, 0), compare=False)


@dataclass(frozen=True, slots=True)
class Sequence:
    """``(a, b, ...)``; ``()`` is the empty sequence."""

    items: tuple["Expr", ...]
    pos: Pos = field(default=Pos(0, 0), compare=False)


@dataclass(frozen=True, slots=True)
class CountWindow:
    """``|count Δ step μ|`` (μ defaults to Δ)."""

    size: int
    step: int
    pos: Pos = field(default=Pos(0, 0), compare=False)


@dataclass(frozen=True, slots=True)
class TimeWindow:
    """``|ref diff Δ step μ|``: a window over the values of the reference element ``ref``."""

    reference: PathExpr
    size: int
    step: int
    pos: Pos = field(default=Pos(0, 0), compare=False)


@dataclass(frozen=True, slots=True)
class ForClause:
    var: str
    source: PathExpr
    window: CountWindow | TimeWindow | None = None
    pos: Pos = field(default=Pos(0, 0), compare=False)


@dataclass(frozen=True, slots=True)
class LetClause:
    """``let $a := Φ(path)``: an aggregate over the elements the path selects."""

    var: str
    function: str
    argument: PathExpr | VarRef
    pos: Pos = field(default=Pos(0, 0), compare=False)


@dataclass(frozen=True, slots=True)
class FLWR:
    clauses: tuple[ForClause | LetClause, ...]
    where: Cond | None
    result: "Expr"
    pos: Pos = field(default=Pos(0, 0), compare=False)


Expr = Union[Element, FLWR, IfExpr, PathExpr, VarRef, Sequence]
