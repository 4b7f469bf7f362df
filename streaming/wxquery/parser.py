"""Parse WXQuery text into the syntax tree of :mod:`streaming.wxquery.syntax`.

The grammar (``wxquery.lark``) is Definition 2.1 of paper 002 with its window
syntax; lark's LALR(1) parser reports the first unexpected token with its
line and column, which :class:`WXQuerySyntaxError` carries.

>>> q = parse_wxquery('<r>{ for $p in stream("s")/r/i where $p/v >= 2 return $p/v }</r>')
>>> q.content[0].clauses[0].source.steps[-1].name
'i'
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

from lark import Lark, Token, Transformer, v_args
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken, VisitError

from .syntax import (
    FLWR,
    And,
    Comparison,
    CountWindow,
    Element,
    Expr,
    ForClause,
    IfExpr,
    LetClause,
    Literal,
    Or,
    PathExpr,
    Pos,
    SelfRef,
    Sequence,
    Shifted,
    Step,
    StreamRef,
    TimeWindow,
    VarRef,
)

__all__ = ["WXQueryError", "WXQuerySyntaxError", "parse_wxquery"]


class WXQueryError(ValueError):
    """A query the supported WXQuery subset cannot take; the message names the place."""

    def __init__(self, message: str, pos: Pos | None = None):
        self.pos = pos
        self.reason = message
        super().__init__(f"{pos}: {message}" if pos is not None and pos.line else message)


class WXQuerySyntaxError(WXQueryError):
    """The text is not WXQuery (Definition 2.1) at ``pos``."""


@lru_cache(maxsize=1)
def _lark() -> Lark:
    grammar = (Path(__file__).with_name("wxquery.lark")).read_text(encoding="utf-8")
    return Lark(grammar, parser="lalr", lexer="contextual", propagate_positions=True, maybe_placeholders=True)


def _pos(meta: Any) -> Pos:
    return Pos(getattr(meta, "line", 0) or 0, getattr(meta, "column", 0) or 0)


def _tpos(token: Token) -> Pos:
    return Pos(token.line or 0, token.column or 0)


def _string(token: Token) -> str:
    return str(token)[1:-1]


@v_args(meta=True)
class _ToSyntax(Transformer):
    """lark tree -> syntax nodes (one method per grammar rule or alias)."""

    def start(self, meta: Any, children: list) -> Expr:
        return children[0]

    def var_expr(self, meta: Any, children: list) -> VarRef:
        (token,) = children
        return VarRef(str(token)[1:], _tpos(token))

    def sequence(self, meta: Any, children: list) -> Sequence:
        return Sequence(tuple(c for c in children if c is not None), _pos(meta))

    def empty_element(self, meta: Any, children: list) -> Element:
        return Element(str(children[0]), (), _pos(meta))

    def element(self, meta: Any, children: list) -> Element:
        open_tag, *content, close_tag = children
        if str(open_tag) != str(close_tag):
            raise WXQuerySyntaxError(f"end tag </{close_tag}> does not match start tag <{open_tag}>",
                                     _tpos(close_tag))
        return Element(str(open_tag), tuple(content), _pos(meta))

    def ifexpr(self, meta: Any, children: list) -> IfExpr:
        cond, then, orelse = children
        return IfExpr(cond, then, orelse, _pos(meta))

    def flwr(self, meta: Any, children: list) -> FLWR:
        *clauses, where, result = children
        return FLWR(tuple(clauses), where, result, _pos(meta))

    def where(self, meta: Any, children: list) -> Any:
        return children[0]

    def for_clause(self, meta: Any, children: list) -> ForClause:
        var, source, window = children
        return ForClause(str(var)[1:], source, window, _pos(meta))

    def let_clause(self, meta: Any, children: list) -> LetClause:
        var, function, argument = children
        return LetClause(str(var)[1:], str(function), argument, _pos(meta))

    def count_window(self, meta: Any, children: list) -> CountWindow:
        size, step = children
        return CountWindow(int(size), int(step) if step is not None else int(size), _pos(meta))

    def time_window(self, meta: Any, children: list) -> TimeWindow:
        reference, size, step = children
        return TimeWindow(reference, int(size), int(step) if step is not None else int(size), _pos(meta))

    def stream_path(self, meta: Any, children: list) -> PathExpr:
        _keyword, name, *steps = children
        return PathExpr(StreamRef(_string(name), _tpos(name)), tuple(steps), False, _pos(meta))

    def var_path(self, meta: Any, children: list) -> PathExpr:
        var, *steps = children
        return PathExpr(VarRef(str(var)[1:], _tpos(var)), tuple(steps), False, _pos(meta))

    def rel_path(self, meta: Any, children: list) -> PathExpr:
        name, *rest = children
        preds = tuple(c for c in rest if not isinstance(c, Step))
        steps = tuple(c for c in rest if isinstance(c, Step))
        return PathExpr(None, (Step(str(name), preds, _tpos(name)), *steps), False, _pos(meta))

    def abs_path(self, meta: Any, children: list) -> PathExpr:
        return PathExpr(None, tuple(children), True, _pos(meta))

    def self_path(self, meta: Any, children: list) -> PathExpr:
        return PathExpr(SelfRef(_pos(meta)), (), False, _pos(meta))

    def step(self, meta: Any, children: list) -> Step:
        name, *preds = children
        return Step(str(name), tuple(preds), _tpos(name))

    def pred(self, meta: Any, children: list) -> Any:
        return children[0]

    def or_cond(self, meta: Any, children: list) -> Any:
        return children[0] if len(children) == 1 else Or(tuple(children), _pos(meta))

    def and_cond(self, meta: Any, children: list) -> Any:
        return children[0] if len(children) == 1 else And(tuple(children), _pos(meta))

    def comparison(self, meta: Any, children: list) -> Comparison:
        left, op, right = children
        return Comparison(left, str(op), right, _pos(meta))

    def shifted(self, meta: Any, children: list) -> Shifted:
        value, sign, number = children
        if not isinstance(value, PathExpr):
            raise WXQuerySyntaxError("arithmetic is only supported as path + number or path - number", _pos(meta))
        delta = float(number)
        return Shifted(value, delta if str(sign) == "+" else -delta, _pos(meta))

    def number(self, meta: Any, children: list) -> Literal:
        (token,) = children
        return Literal(float(token), _tpos(token))

    def string(self, meta: Any, children: list) -> Literal:
        (token,) = children
        return Literal(_string(token), _tpos(token))


def parse_wxquery(text: str) -> Expr:
    """Parse ``text``; raise :class:`WXQuerySyntaxError` with the position of the first error."""
    try:
        tree = _lark().parse(text)
    except UnexpectedCharacters as exc:
        raise WXQuerySyntaxError(f"unexpected character {text[exc.pos_in_stream]!r}",
                                 Pos(exc.line, exc.column)) from None
    except UnexpectedEOF as exc:
        expected = ", ".join(sorted(exc.expected)[:6])
        raise WXQuerySyntaxError(f"the query ends too early (expected {expected})", _end(text)) from None
    except UnexpectedToken as exc:
        if exc.token.type == "$END":
            raise WXQuerySyntaxError("the query ends too early", _end(text)) from None
        expected = ", ".join(sorted(_describe(e) for e in exc.expected)[:6])
        raise WXQuerySyntaxError(f"unexpected {exc.token!s} (expected {expected})",
                                 Pos(exc.line, exc.column)) from None
    except UnexpectedInput as exc:  # pragma: no cover - the three above are lark's kinds
        raise WXQuerySyntaxError(str(exc), Pos(exc.line, exc.column)) from None
    try:
        return _ToSyntax().transform(tree)
    except VisitError as exc:
        if isinstance(exc.orig_exc, WXQueryError):
            raise exc.orig_exc from None
        raise


def _end(text: str) -> Pos:
    lines = text.split("\n")
    return Pos(len(lines), len(lines[-1]) + 1)


_TERMINALS = {"LSQB": "[", "RSQB": "]", "LPAR": "(", "RPAR": ")", "LBRACE": "{", "RBRACE": "}",
              "VBAR": "|", "SLASH": "/", "COMMA": ",", "LESSTHAN": "<", "MORETHAN": ">", "DOT": ".",
              "NAME": "a name", "VAR": "a $variable", "INT": "an integer", "NUMBER": "a number",
              "STRING": "a string", "COMPARATOR": "a comparison", "ADDOP": "+ or -",
              "AGGREGATE": "min, max, sum, count or avg"}


def _describe(terminal: str) -> str:
    if terminal in _TERMINALS:
        return _TERMINALS[terminal]
    return terminal.lower() if terminal.isupper() else terminal
