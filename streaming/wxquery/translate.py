"""WXQuery -> compiled subscription and its APT or APF (paper 002, Sect. 3.2.4 and Appendix A).

:func:`compile_subscription` checks a parsed query against the supported
subset and the stream DTDs, and returns a :class:`Subscription`: what the
evaluator runs (inputs with their pre-selections and windows, aggregates,
conditions as predicates) and the query's abstraction, built by the paper's
inference rules in their *non-optimized* form (every element the query reads
is an output element, so the original query can post-process the shared
stream, Sect. 3.2.3):

* rule 3 (for, no window): σ(pre ∧ where) on the returned paths and the paths
  the conditions read;
* rules 4, 5 (windows): ω on the item with pre-σ (the for path's predicate)
  and post-σ (where conditions on the window's elements);
* rule 6 (let): γ on the aggregated element, its pre-σ (predicates in the
  argument) and σ (where conditions on the value);
* rule 7 (if): σ(χ) and σ(¬χ) on the two branches' outputs;
* Appendix A: one APT per input and a join annotation ⋈ for conditions that
  read two inputs.

Conditions compare elements that occur exactly once in every item (so a
predicate is a condition on the item, and implication between predicates is
decidable with intervals), or aggregate values. Anything else is refused
with a :class:`WXQueryError` naming the place.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping

from ..xmlstream.dtd import StreamDTD
from .apt import APF, APT, Abstraction, Aggregate, JoinAnnotation, Window, build_apt
from .parser import WXQueryError, parse_wxquery
from .paths import absolute, qualify, split
from .predicates import DNF, FALSE, TRUE, Atom, conjoin, disjoin, implies, negate
from .syntax import (
    FLWR,
    And,
    Cond,
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
    Sequence,
    Shifted,
    StreamRef,
    VarRef,
)

__all__ = ["Input", "Let", "Subscription", "compile_subscription", "compile_text"]

_FLIP = {"=": "=", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}


@dataclass(frozen=True)
class Input:
    """One ``for`` over a stream: its items pass ``pre`` and enter ``window``."""

    var: str
    stream: str
    dtd: StreamDTD = field(compare=False, repr=False)
    item_path: str = ""
    pre: DNF = TRUE
    window: Window | None = None


@dataclass(frozen=True)
class Let:
    """``let $var := function(path[pre])`` over the window's items."""

    var: str
    aggregate: Aggregate


@dataclass(frozen=True)
class Subscription:
    """A checked subscription: what the evaluator runs, and its abstraction.

    Predicate paths are absolute (``/photons/photon/en``) for one input and
    stream-qualified for joins; aggregate values are named by their key
    (``avg(/photons/photon/en)``). ``where`` is the item condition (one input,
    no window) or the whole pair condition (joins); ``post`` the window's
    post-selection; ``having`` the condition on aggregate values.
    """

    text: str
    wrappers: tuple[str, ...]
    inputs: tuple[Input, ...]
    lets: tuple[Let, ...]
    where: DNF
    post: DNF
    having: DNF
    result: Expr
    conditions: Mapping[int, DNF] = field(repr=False)
    abstraction: Abstraction = field(repr=False)

    def condition(self, cond: Cond) -> DNF:
        """The predicate of an ``if`` condition of the result expression."""
        return self.conditions[id(cond)]


DTDs = Mapping[str, StreamDTD] | Callable[[str], StreamDTD | None]


def compile_text(text: str, dtds: DTDs) -> Subscription:
    """Parse and compile WXQuery ``text`` against the stream DTDs (by stream id)."""
    return compile_subscription(parse_wxquery(text), dtds, text)


def compile_subscription(query: Expr, dtds: DTDs, text: str = "") -> Subscription:
    return _Compiler(dtds, text).compile(query)


@dataclass
class _Binding:
    kind: str  # "item", "window", "let", "node"
    input: int = 0
    path: str = ""
    let: Let | None = None


class _Compiler:
    def __init__(self, dtds: DTDs, text: str):
        self._lookup = dtds if callable(dtds) else dtds.get
        self.text = text
        self.inputs: list[Input] = []
        self.lets: list[Let] = []
        self.env: dict[str, _Binding] = {}
        self.kinds: dict[str, tuple[str, Pos]] = {}
        self.conditions: dict[int, DNF] = {}
        self._qualify = False
        self._join_parts: list[DNF] = []
        self._join_local: list[DNF] = []
        self.paths: list[set[str]] = []
        self.outputs: list[dict[str, DNF]] = []
        self.window_outputs: set[str] = set()
        self.agg_contexts: dict[str, DNF] = {}

    # -- shape ---------------------------------------------------------------------------

    def compile(self, query: Expr) -> Subscription:
        wrappers: list[str] = []
        node = query
        while isinstance(node, Element):
            if len(node.content) != 1:
                raise WXQueryError("the subset wraps exactly one FLWR expression over stream(...) in element "
                                   f"constructors; <{node.tag}> has {len(node.content)} parts", node.pos)
            wrappers.append(node.tag)
            node = node.content[0]
        if not isinstance(node, FLWR):
            raise WXQueryError("a subscription is a FLWR expression over stream(...), possibly wrapped in "
                               "element constructors", getattr(node, "pos", None))
        return self._flwr(node, tuple(wrappers))

    def _flwr(self, flwr: FLWR, wrappers: tuple[str, ...]) -> Subscription:
        fors = [c for c in flwr.clauses if isinstance(c, ForClause)]
        lets = [c for c in flwr.clauses if isinstance(c, LetClause)]
        first_let = next((i for i, c in enumerate(flwr.clauses) if isinstance(c, LetClause)), len(flwr.clauses))
        if any(isinstance(c, ForClause) for c in flwr.clauses[first_let:]):
            raise WXQueryError("for clauses must come before let clauses", flwr.clauses[first_let].pos)
        if len(fors) > 2:
            raise WXQueryError("the subset joins at most two streams", fors[2].pos)
        for clause in fors:
            self._input(clause)
        if len(fors) == 2:
            if self.inputs[0].stream == self.inputs[1].stream:
                raise WXQueryError("self-joins (one stream twice) are not in the subset", fors[1].pos)
            for clause, inp in zip(fors, self.inputs):
                if inp.window is None:
                    raise WXQueryError("a join needs a window on each input (|count Δ step μ| or "
                                       "|ref diff Δ step μ|)", clause.pos)
            if lets:
                raise WXQueryError("aggregates in join queries are not supported (paper Sect. 5.1.2)", lets[0].pos)
        if len(self.inputs) == 1 and self.inputs[0].window is not None:
            self.env[self.inputs[0].var].kind = "window"
        self._qualify = len(self.inputs) > 1
        for clause in lets:
            self._let(clause)
        where, post, having = self._where(flwr.where)
        windowed = self.inputs[0].window is not None and len(self.inputs) == 1
        if windowed:
            context = TRUE
        elif len(self.inputs) == 1:
            context = conjoin(self.inputs[0].pre, where)
            self._add_outputs(0, self._local_paths(0, self.inputs[0].pre) | self._local_paths(0, where), context)
        else:
            context = where
            self._join_local = [conjoin(TRUE, *(self._input_condition(i, part) for part in self._join_parts))
                                for i in range(len(self.inputs))]
            for i in range(len(self.inputs)):
                self._add_outputs(i, self._local_paths(i, where), TRUE)
        self._result(flwr.result, context)
        abstraction = self._abstraction(where, post, having)
        return Subscription(
            text=self.text, wrappers=wrappers, inputs=tuple(self.inputs), lets=tuple(self.lets), where=where,
            post=post, having=having, result=flwr.result, conditions=self.conditions,
            abstraction=abstraction,
        )

    # -- inputs and lets ----------------------------------------------------------------------

    def _input(self, clause: ForClause) -> None:
        source = clause.source
        if not isinstance(source.base, StreamRef):
            raise WXQueryError("a top-level for iterates over stream(\"id\")/root/item", source.pos)
        stream = source.base.stream
        dtd = self._lookup(stream)
        if dtd is None:
            raise WXQueryError(f"unknown stream {stream!r}", source.base.pos)
        names = tuple(s.name for s in source.steps)
        if names != (dtd.root, dtd.item):
            raise WXQueryError(f"stream {stream!r} has items /{dtd.root}/{dtd.item}; the for must iterate over "
                               f"them, not {absolute(names) if names else 'the stream node'}", source.pos)
        if source.steps[0].predicates:
            raise WXQueryError("predicates on the stream's root element are not in the subset",
                               source.steps[0].predicates[0].pos)
        index = len(self.inputs)
        item_path = absolute(names)
        self.paths.append({item_path})
        self.outputs.append({})
        self.inputs.append(Input(clause.var, stream, dtd, item_path))
        pre = self._predicates(index, item_path, source.steps[1].predicates)
        window = None
        if clause.window is not None:
            w = clause.window
            if w.size < 1 or w.step < 1:
                raise WXQueryError("window size and step must be positive integers", w.pos)
            if isinstance(w, CountWindow):
                window = Window(kind="count", size=w.size, step=w.step, pre=pre)
            else:
                ref = self._leaf_path(index, item_path, w.reference, numeric=True)
                window = Window(kind="time", reference=ref, size=w.size, step=w.step, pre=pre)
        self.inputs[index] = Input(clause.var, stream, dtd, item_path, pre, window)
        self._bind(clause.var, _Binding("item", index), clause.pos)

    def _let(self, clause: LetClause) -> None:
        if len(self.inputs) != 1 or self.inputs[0].window is None:
            raise WXQueryError("aggregates need a windowed for over one stream: "
                               "for $w in stream(...)/root/item |...| let $a := ...", clause.pos)
        inp = self.inputs[0]
        arg = clause.argument
        base = arg if isinstance(arg, VarRef) else arg.base
        if not isinstance(base, VarRef) or base.name != inp.var:
            raise WXQueryError(f"an aggregate's argument is ${inp.var} or a path below it", arg.pos)
        steps = () if isinstance(arg, VarRef) else arg.steps
        path = inp.item_path
        pre = TRUE
        for step in steps:
            path = f"{path}/{step.name}"
            if self._dtd(0).resolve(self._dtd(0).item, split(path)[2:]) is None:
                raise WXQueryError(f"{path} is not an element of stream {inp.stream!r}", step.pos)
            if step.predicates:
                if not self._dtd(0).exactly_once(split(path)[2:]):
                    raise WXQueryError(f"a predicate on {path}, which may be absent or repeat in an item, is not "
                                       "in the subset", step.pos)
                pre = conjoin(pre, self._predicates(0, path, step.predicates))
        if not pre.is_true and inp.window is not None and inp.window.kind == "count":
            raise WXQueryError("a predicate in an aggregate's argument is not supported with a count window "
                               "(put it on the for path)", arg.pos)
        if clause.function != "count" or steps:
            if not self._dtd(0).exactly_once(split(path)[2:]) or not self._dtd(0).is_leaf(split(path)[-1]):
                raise WXQueryError(f"{clause.function}() needs an element holding text that occurs exactly once "
                                   f"in every item; {path} does not", arg.pos)
            if clause.function != "count":
                self._kind(path, "number", arg.pos)
        self.paths[0].add(path)
        let = Let(clause.var, Aggregate(function=clause.function, path=path, pre=pre, output=False))
        self.lets.append(let)
        self._bind(clause.var, _Binding("let", 0, let=let), clause.pos)

    def _bind(self, var: str, binding: _Binding, pos: Pos) -> None:
        if var in self.env:
            raise WXQueryError(f"${var} is bound twice", pos)
        self.env[var] = binding

    def _dtd(self, index: int) -> StreamDTD:
        return self.inputs[index].dtd

    # -- conditions ------------------------------------------------------------------------------

    def _predicates(self, index: int, context: str, preds: tuple[Cond, ...]) -> DNF:
        return conjoin(TRUE, *(self._cond(p, index, context) for p in preds)) if preds else TRUE

    def _cond(self, cond: Cond, index: int | None, context: str | None) -> DNF:
        """A condition as a predicate; ``context`` is the element relative paths start at (in predicates)."""
        if isinstance(cond, And):
            return conjoin(*(self._cond(c, index, context) for c in cond.items))
        if isinstance(cond, Or):
            return disjoin(*(self._cond(c, index, context) for c in cond.items))
        left = self._operand(cond.left, index, context)
        right = self._operand(cond.right, index, context)
        op = cond.op
        if left[0] == "literal" and right[0] == "literal":
            raise WXQueryError("a comparison of two constants is not in the subset", cond.pos)
        if left[0] == "literal":
            left, right, op = right, left, _FLIP[op]
        lkind, lname, lshift = left
        rkind, rvalue, rshift = right
        if rkind == "literal":
            if lkind == "agg" and isinstance(rvalue, str):
                raise WXQueryError("aggregate values are numbers", cond.pos)
            if lkind == "path":
                self._kind(lname, "string" if isinstance(rvalue, str) else "number", cond.pos)
            if lshift and isinstance(rvalue, str):
                raise WXQueryError("arithmetic on strings is not in the subset", cond.pos)
            value: float | str = rvalue if isinstance(rvalue, str) else float(rvalue) - lshift
            return DNF(any_of=((Atom(path=lname, op=op, value=value),),))
        if lkind != "path" or rkind != "path":
            raise WXQueryError("an aggregate value can only be compared with a constant", cond.pos)
        self._kind(lname, "number", cond.pos)
        self._kind(rvalue, "number", cond.pos)
        return DNF(any_of=((Atom(path=lname, minus=rvalue, op=op, value=float(rshift - lshift)),),))

    def _operand(self, operand, index: int | None, context: str | None) -> tuple[str, object, float]:
        """(``"path"``, predicate path, shift) | (``"agg"``, key, 0) | (``"literal"``, value, 0)."""
        if isinstance(operand, Literal):
            return ("literal", operand.value, 0.0)
        if isinstance(operand, Shifted):
            kind, name, _ = self._operand(operand.path, index, context)
            if kind != "path":
                raise WXQueryError("arithmetic applies to element paths only", operand.pos)
            return ("path", name, operand.delta)
        if isinstance(operand, VarRef):
            binding = self.env.get(operand.name)
            if binding is None:
                raise WXQueryError(f"unknown variable ${operand.name}", operand.pos)
            if binding.kind != "let":
                raise WXQueryError(f"compare elements below ${operand.name}, not ${operand.name} itself",
                                   operand.pos)
            return ("agg", binding.let.aggregate.key, 0.0)
        assert isinstance(operand, PathExpr)
        if isinstance(operand.base, VarRef):
            binding = self.env.get(operand.base.name)
            if binding is None:
                raise WXQueryError(f"unknown variable ${operand.base.name}", operand.base.pos)
            if binding.kind not in ("item", "window"):
                raise WXQueryError(f"conditions may read paths below the stream items (${operand.base.name} "
                                   "is not a for variable over a stream)", operand.pos)
            which = binding.input
            start = self.inputs[which].item_path
        elif isinstance(operand.base, StreamRef):
            raise WXQueryError("conditions read paths relative to a variable or a predicate's context",
                               operand.pos)
        else:
            if context is None or index is None:
                raise WXQueryError("a relative path is only allowed inside a predicate [...] or a window",
                                   operand.pos)
            which, start = index, context
        path = self._leaf_path(which, start, operand, numeric=None)
        self.paths[which].add(path)
        return ("path", qualify(self.inputs[which].stream, path) if self._qualify else path, 0.0)

    def _leaf_path(self, index: int, start: str, path: PathExpr, numeric: bool | None) -> str:
        """The absolute path of a compared element: it must hold text and occur once in every item."""
        dtd = self._dtd(index)
        if path.absolute:
            full = absolute(tuple(s.name for s in path.steps))
        else:
            full = start + "".join(f"/{s.name}" for s in path.steps)
        for step in path.steps:
            if step.predicates:
                raise WXQueryError("predicates inside a compared path are not in the subset", step.pos)
        steps = split(full)
        if steps[:2] != (dtd.root, dtd.item) or dtd.resolve(dtd.item, steps[2:]) is None:
            raise WXQueryError(f"{full} is not an element of the items of stream {self.inputs[index].stream!r}",
                               path.pos)
        if not dtd.exactly_once(steps[2:]) or not dtd.is_leaf(steps[-1]):
            raise WXQueryError(f"{full} must hold text and occur exactly once in every item to be compared "
                               "(the subset's conditions are conditions on single values)", path.pos)
        if numeric:
            self._kind(full, "number", path.pos)
        self.paths[index].add(full)
        return full

    def _kind(self, path: str, kind: str, pos: Pos) -> None:
        seen = self.kinds.setdefault(path, (kind, pos))
        if seen[0] != kind:
            raise WXQueryError(f"{path} is compared as a {kind} here and as a {seen[0]} at {seen[1]}", pos)

    def _where(self, where: Cond | None) -> tuple[DNF, DNF, DNF]:
        """Split ``where`` into the item (or pair) condition, the window post-selection and the having."""
        if where is None:
            return TRUE, TRUE, TRUE
        conjuncts = where.items if isinstance(where, And) else (where,)
        item, post, having = [], [], []
        windowed = len(self.inputs) == 1 and self.inputs[0].window is not None
        for conjunct in conjuncts:
            predicate = self._cond(conjunct, None, None)
            aggs = {a.path for c in predicate.any_of for a in c if "(" in a.path and not a.path.startswith("stream(")}
            if aggs and aggs != predicate.paths():
                raise WXQueryError("a where condition mixes aggregate values and elements; make them separate "
                                   "conjuncts (... and ...)", conjunct.pos)
            self._join_parts.append(predicate)
            if aggs:
                having.append(predicate)
            elif windowed:
                post.append(predicate)
            else:
                item.append(predicate)
        return conjoin(TRUE, *item), conjoin(TRUE, *post), conjoin(TRUE, *having)

    def _local_paths(self, index: int, predicate: DNF) -> set[str]:
        stream = self.inputs[index].stream
        out = set()
        for p in predicate.paths():
            if p.startswith("stream("):
                if p.startswith(f'stream("{stream}")'):
                    out.add(p[len(f'stream("{stream}")'):])
            elif "(" not in p:
                out.add(p)
        return out

    # -- the result expression -------------------------------------------------------------------

    def _result(self, expr: Expr, context: DNF) -> DNF:
        """Record what ``expr`` returns under ``context``; return when it returns an element or value.

        A constructed element must hold an element of the stream or an
        aggregate value whenever it is built (paper Sect. 2): its content
        must provide one under every condition of its context.
        """
        if isinstance(expr, Element):
            provided = disjoin(FALSE, *(self._result(child, context) for child in expr.content))
            if not implies(context, provided):
                raise WXQueryError(f"<{expr.tag}> may be returned without any element of the stream or aggregate "
                                   "value in it; the subset requires one in every result (Sect. 2)", expr.pos)
            return provided
        if isinstance(expr, Sequence):
            return disjoin(FALSE, *(self._result(child, context) for child in expr.items))
        if isinstance(expr, IfExpr):
            cond = self._cond(expr.cond, None, None)
            windowed = len(self.inputs) == 1 and self.inputs[0].window is not None
            if windowed and any("(" not in p for p in cond.paths()):
                raise WXQueryError("inside the return of a windowed for, conditions may read aggregate values "
                                   "only (put conditions on the window's elements in where)", expr.cond.pos)
            self.conditions[id(expr.cond)] = cond
            if not windowed:
                for i in range(len(self.inputs)):
                    self._add_outputs(i, self._local_paths(i, cond), context if len(self.inputs) == 1 else TRUE)
            then = self._result(expr.then, conjoin(context, cond))
            orelse = self._result(expr.orelse, conjoin(context, negate(cond)))
            return disjoin(conjoin(cond, then), conjoin(negate(cond), orelse))
        if isinstance(expr, VarRef):
            binding = self._binding(expr.name, expr.pos)
            if binding.kind == "let":
                key = binding.let.aggregate.key
                self.agg_contexts[key] = disjoin(self.agg_contexts.get(key, FALSE), context)
            else:
                self._output(binding, binding.path or self.inputs[binding.input].item_path, context)
            return TRUE
        if isinstance(expr, PathExpr):
            return self._returned_path(expr, context)
        if isinstance(expr, FLWR):
            self._nested(expr, context)
            return FALSE
        raise WXQueryError("unsupported expression", getattr(expr, "pos", None))  # pragma: no cover

    def _binding(self, name: str, pos: Pos) -> _Binding:
        binding = self.env.get(name)
        if binding is None:
            raise WXQueryError(f"unknown variable ${name}", pos)
        return binding

    def _returned_path(self, expr: PathExpr, context: DNF) -> DNF:
        if not isinstance(expr.base, VarRef):
            raise WXQueryError("a returned path starts at a variable ($x/...)", expr.pos)
        binding = self._binding(expr.base.name, expr.base.pos)
        if binding.kind == "let":
            raise WXQueryError(f"${expr.base.name} is an aggregate value; it has no elements", expr.pos)
        for step in expr.steps:
            if step.predicates:
                raise WXQueryError("predicates in returned paths are not in the subset; use "
                                   "if (...) then $x/path else ()", step.predicates[0].pos)
        start = binding.path or self.inputs[binding.input].item_path
        full = start + "".join(f"/{s.name}" for s in expr.steps)
        dtd = self._dtd(binding.input)
        if dtd.resolve(dtd.item, split(full)[2:]) is None:
            raise WXQueryError(f"{full} is not an element of the items of stream "
                               f"{self.inputs[binding.input].stream!r}", expr.pos)
        self._output(binding, full, context)
        base = split(start)
        steps = split(full)[len(base):]
        dtd = self._dtd(binding.input)
        required = all((occ := dtd.occurrence(parent, child)) is not None and occ.low >= 1
                       for parent, child in zip((base[-1],) + steps[:-1], steps))
        return TRUE if required else FALSE

    def _output(self, binding: _Binding, path: str, context: DNF) -> None:
        index = binding.input
        if binding.kind == "window":
            self.window_outputs.add(path)
            self.paths[index].add(path)
        else:
            self._add_outputs(index, {path}, context if len(self.inputs) == 1 else TRUE)

    def _add_outputs(self, index: int, paths: set[str], cond: DNF) -> None:
        local = self._localize(index, cond)
        outputs = self.outputs[index]
        for path in paths:
            self.paths[index].add(path)
            outputs[path] = disjoin(outputs[path], local) if path in outputs else local

    def _localize(self, index: int, cond: DNF) -> DNF:
        """One input: ``cond``; a join: the where conjuncts about input ``index`` alone."""
        if len(self.inputs) == 1:
            return cond
        return self._join_local[index]

    def _input_condition(self, index: int, cond: DNF) -> DNF:
        """``cond`` unqualified if it reads input ``index`` alone, else true."""
        prefix = f'stream("{self.inputs[index].stream}")'
        if all(all(a.path.startswith(prefix) and (a.minus is None or a.minus.startswith(prefix)) for a in c)
               for c in cond.any_of):
            return DNF(any_of=tuple(tuple(a.model_copy(update={
                "path": a.path[len(prefix):], "minus": a.minus[len(prefix):] if a.minus else None}) for a in c)
                for c in cond.any_of))
        return TRUE

    def _nested(self, flwr: FLWR, context: DNF) -> None:
        if len(flwr.clauses) != 1 or not isinstance(flwr.clauses[0], ForClause) or flwr.where is not None:
            raise WXQueryError("a nested FLWR in the subset is one for over elements of an item, without "
                               "let or where: for $c in $x/path return ...", flwr.pos)
        clause = flwr.clauses[0]
        if clause.window is not None:
            raise WXQueryError("windows are only allowed on a for over a stream", clause.window.pos)
        source = clause.source
        if not isinstance(source.base, VarRef):
            raise WXQueryError("a nested for iterates over a path below a variable ($x/path)", source.pos)
        binding = self._binding(source.base.name, source.base.pos)
        if binding.kind not in ("item", "node"):
            raise WXQueryError(f"a nested for iterates below an item or element variable, not "
                               f"${source.base.name}", source.pos)
        if any(s.predicates for s in source.steps):
            raise WXQueryError("predicates in a nested for path are not in the subset", source.pos)
        start = binding.path or self.inputs[binding.input].item_path
        full = start + "".join(f"/{s.name}" for s in source.steps)
        dtd = self._dtd(binding.input)
        if dtd.resolve(dtd.item, split(full)[2:]) is None:
            raise WXQueryError(f"{full} is not an element of stream {self.inputs[binding.input].stream!r}",
                               source.pos)
        self.paths[binding.input].add(full)
        self._bind(clause.var, _Binding("node", binding.input, full), clause.pos)
        self._result(flwr.result, context)
        del self.env[clause.var]

    # -- abstraction ---------------------------------------------------------------------------------

    def _abstraction(self, where: DNF, post: DNF, having: DNF) -> Abstraction:
        if len(self.inputs) == 1:
            return self._apt(0, where, post, having)
        trees = tuple(self._apt(i, TRUE, TRUE, TRUE) for i in range(len(self.inputs)))
        join = conjoin(TRUE, *(part for part in self._join_parts if self._spans(part)))
        parents = tuple(sorted(qualify(inp.stream, p) for i, inp in enumerate(self.inputs)
                               for p in self.outputs[i]))
        return APF(trees=trees, join=JoinAnnotation(predicate=join, parents=parents))

    def _apt(self, index: int, where: DNF, post: DNF, having: DNF) -> APT:
        inp = self.inputs[index]
        paths = set(self.paths[index])
        if inp.window is None or len(self.inputs) > 1:
            window = inp.window
            return build_apt(inp.stream, inp.dtd, paths, self.outputs[index], window=window)
        window = inp.window.model_copy(update={"post": post})
        aggregates = []
        for let in self.lets:
            agg = let.aggregate
            context = self.agg_contexts.get(agg.key)
            aggregates.append(agg.model_copy(update={
                "output": context is not None,
                "selection": conjoin(having, context) if context is not None else having,
            }))
        unique = tuple({a.key: a for a in aggregates}.values())
        outputs = {p: TRUE for p in self.window_outputs}
        return build_apt(inp.stream, inp.dtd, paths, outputs, window=window, aggregates=unique)

    def _spans(self, predicate: DNF) -> bool:
        streams = set()
        for p in predicate.paths():
            streams.add(p.split(")")[0])
        return len(streams) > 1
