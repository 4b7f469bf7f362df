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
    """Check a parsed query against the subset and the stream DTDs and compile it (see the module docstring)."""
    flwr, wrappers = _unwrap(query)
    scope = _Scope(dtds if callable(dtds) else dtds.get)
    conditions = _Conditions(scope)
    _bind_clauses(flwr, scope, conditions)
    where = conditions.split_where(flwr.where)
    results = _Results(scope, conditions)
    results.collect(flwr.result, results.select_where(where))
    return Subscription(
        text=text, wrappers=wrappers, inputs=tuple(scope.inputs), lets=tuple(scope.lets), where=where.item,
        post=where.post, having=where.having, result=flwr.result, conditions=results.if_predicates,
        abstraction=_abstraction(scope, results, where),
    )


def _unwrap(query: Expr) -> tuple[FLWR, tuple[str, ...]]:
    """The subscription's FLWR and the tags of the element constructors around it, outermost first."""
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
    return node, tuple(wrappers)


# -- what the clauses bind ------------------------------------------------------------------------


@dataclass
class _Binding:
    """What a variable stands for: an input's item or window, a let's aggregate, or elements at ``path``."""

    kind: str  # "item", "window", "let", "node"
    input: int = 0
    path: str = ""
    let: Let | None = None


@dataclass
class _Scope:
    """What the for and let clauses bound: the inputs, the lets, the variables and the paths each input reads.

    ``qualify`` is set once all inputs are bound and there are two: from then on predicate paths are
    stream-qualified.
    """

    lookup: Callable[[str], StreamDTD | None]
    inputs: list[Input] = field(default_factory=list)
    lets: list[Let] = field(default_factory=list)
    env: dict[str, _Binding] = field(default_factory=dict)
    paths: list[set[str]] = field(default_factory=list)
    qualify: bool = False

    @property
    def windowed(self) -> bool:
        """One input with a window: where conditions select from the window, the return reads aggregates."""
        return len(self.inputs) == 1 and self.inputs[0].window is not None

    def dtd(self, index: int) -> StreamDTD:
        return self.inputs[index].dtd

    def bind(self, var: str, binding: _Binding, pos: Pos) -> None:
        if var in self.env:
            raise WXQueryError(f"${var} is bound twice", pos)
        self.env[var] = binding

    def binding(self, name: str, pos: Pos) -> _Binding:
        binding = self.env.get(name)
        if binding is None:
            raise WXQueryError(f"unknown variable ${name}", pos)
        return binding

    def start(self, binding: _Binding) -> str:
        """The absolute path of the elements a (non-let) variable stands for."""
        return binding.path or self.inputs[binding.input].item_path


def _bind_clauses(flwr: FLWR, scope: _Scope, conditions: _Conditions) -> None:
    """Check the order and number of the for and let clauses and bind them in ``scope``."""
    fors = [c for c in flwr.clauses if isinstance(c, ForClause)]
    lets = [c for c in flwr.clauses if isinstance(c, LetClause)]
    first_let = next((i for i, c in enumerate(flwr.clauses) if isinstance(c, LetClause)), len(flwr.clauses))
    if any(isinstance(c, ForClause) for c in flwr.clauses[first_let:]):
        raise WXQueryError("for clauses must come before let clauses", flwr.clauses[first_let].pos)
    if len(fors) > 2:
        raise WXQueryError("the subset joins at most two streams", fors[2].pos)
    for clause in fors:
        _bind_input(clause, scope, conditions)
    if len(fors) == 2:
        if scope.inputs[0].stream == scope.inputs[1].stream:
            raise WXQueryError("self-joins (one stream twice) are not in the subset", fors[1].pos)
        for clause, inp in zip(fors, scope.inputs):
            if inp.window is None:
                raise WXQueryError("a join needs a window on each input (|count Δ step μ| or "
                                   "|ref diff Δ step μ|)", clause.pos)
        if lets:
            raise WXQueryError("aggregates in join queries are not supported (paper Sect. 5.1.2)", lets[0].pos)
    if len(scope.inputs) == 1 and scope.inputs[0].window is not None:
        scope.env[scope.inputs[0].var].kind = "window"
    scope.qualify = len(scope.inputs) > 1
    for clause in lets:
        _bind_let(clause, scope, conditions)


def _bind_input(clause: ForClause, scope: _Scope, conditions: _Conditions) -> None:
    """A for over a stream's items: its input, with the item path's predicates and the window."""
    source = clause.source
    if not isinstance(source.base, StreamRef):
        raise WXQueryError("a top-level for iterates over stream(\"id\")/root/item", source.pos)
    stream = source.base.stream
    dtd = scope.lookup(stream)
    if dtd is None:
        raise WXQueryError(f"unknown stream {stream!r}", source.base.pos)
    names = tuple(s.name for s in source.steps)
    if names != (dtd.root, dtd.item):
        raise WXQueryError(f"stream {stream!r} has items /{dtd.root}/{dtd.item}; the for must iterate over "
                           f"them, not {absolute(names) if names else 'the stream node'}", source.pos)
    if source.steps[0].predicates:
        raise WXQueryError("predicates on the stream's root element are not in the subset",
                           source.steps[0].predicates[0].pos)
    index = len(scope.inputs)
    item_path = absolute(names)
    scope.paths.append({item_path})
    scope.inputs.append(Input(clause.var, stream, dtd, item_path))
    pre = conditions.predicates(index, item_path, source.steps[1].predicates)
    window = None
    if clause.window is not None:
        w = clause.window
        if w.size < 1 or w.step < 1:
            raise WXQueryError("window size and step must be positive integers", w.pos)
        if isinstance(w, CountWindow):
            window = Window(kind="count", size=w.size, step=w.step, pre=pre)
        else:
            ref = conditions.leaf_path(index, item_path, w.reference, numeric=True)
            window = Window(kind="time", reference=ref, size=w.size, step=w.step, pre=pre)
    scope.inputs[index] = Input(clause.var, stream, dtd, item_path, pre, window)
    scope.bind(clause.var, _Binding("item", index), clause.pos)


def _bind_let(clause: LetClause, scope: _Scope, conditions: _Conditions) -> None:
    """``let $a := f($w/path[pre])`` over the one windowed input: its aggregate."""
    if not scope.windowed:
        raise WXQueryError("aggregates need a windowed for over one stream: "
                           "for $w in stream(...)/root/item |...| let $a := ...", clause.pos)
    inp = scope.inputs[0]
    dtd = scope.dtd(0)
    arg = clause.argument
    base = arg if isinstance(arg, VarRef) else arg.base
    if not isinstance(base, VarRef) or base.name != inp.var:
        raise WXQueryError(f"an aggregate's argument is ${inp.var} or a path below it", arg.pos)
    steps = () if isinstance(arg, VarRef) else arg.steps
    path = inp.item_path
    pre = TRUE
    for step in steps:
        path = f"{path}/{step.name}"
        if dtd.resolve(dtd.item, split(path)[2:]) is None:
            raise WXQueryError(f"{path} is not an element of stream {inp.stream!r}", step.pos)
        if step.predicates:
            if not dtd.exactly_once(split(path)[2:]):
                raise WXQueryError(f"a predicate on {path}, which may be absent or repeat in an item, is not "
                                   "in the subset", step.pos)
            pre = conjoin(pre, conditions.predicates(0, path, step.predicates))
    if not pre.is_true and inp.window is not None and inp.window.kind == "count":
        raise WXQueryError("a predicate in an aggregate's argument is not supported with a count window "
                           "(put it on the for path)", arg.pos)
    if clause.function != "count" or steps:
        if not dtd.exactly_once(split(path)[2:]) or not dtd.is_leaf(split(path)[-1]):
            raise WXQueryError(f"{clause.function}() needs an element holding text that occurs exactly once "
                               f"in every item; {path} does not", arg.pos)
        if clause.function != "count":
            conditions.check_kind(path, "number", arg.pos)
    scope.paths[0].add(path)
    let = Let(clause.var, Aggregate(function=clause.function, path=path, pre=pre, output=False))
    scope.lets.append(let)
    scope.bind(clause.var, _Binding("let", 0, let=let), clause.pos)


# -- conditions ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Where:
    """``where`` split into the item (or pair) condition, the window's post-selection and the condition on
    aggregate values; ``conjuncts`` are all its conjuncts as predicates (a join's annotation takes those
    that span both inputs)."""

    item: DNF = TRUE
    post: DNF = TRUE
    having: DNF = TRUE
    conjuncts: tuple[DNF, ...] = ()


class _Conditions:
    """The query's conditions as predicates (DNF over atoms) on single-valued elements or aggregate values.

    It checks that every compared element holds text and occurs exactly once in every item, and that it
    is compared as one kind (number or string) throughout the query.
    """

    def __init__(self, scope: _Scope):
        self.scope = scope
        self._kinds: dict[str, tuple[str, Pos]] = {}

    def predicates(self, index: int, context: str, preds: tuple[Cond, ...]) -> DNF:
        """The conjunction of the predicates ``[...]`` on ``context``, an element of input ``index``."""
        return conjoin(TRUE, *(self.condition(p, index, context) for p in preds)) if preds else TRUE

    def split_where(self, where: Cond | None) -> _Where:
        """``where`` by conjunct: aggregate conditions, window post-selection (windowed) or item condition."""
        if where is None:
            return _Where()
        conjuncts = where.items if isinstance(where, And) else (where,)
        item, post, having, parts = [], [], [], []
        for conjunct in conjuncts:
            predicate = self.condition(conjunct, None, None)
            aggs = {a.path for c in predicate.any_of for a in c if "(" in a.path and not a.path.startswith("stream(")}
            if aggs and aggs != predicate.paths():
                raise WXQueryError("a where condition mixes aggregate values and elements; make them separate "
                                   "conjuncts (... and ...)", conjunct.pos)
            parts.append(predicate)
            if aggs:
                having.append(predicate)
            elif self.scope.windowed:
                post.append(predicate)
            else:
                item.append(predicate)
        return _Where(conjoin(TRUE, *item), conjoin(TRUE, *post), conjoin(TRUE, *having), tuple(parts))

    def condition(self, cond: Cond, index: int | None, context: str | None) -> DNF:
        """A condition as a predicate; ``context`` is the element relative paths start at (in predicates)."""
        if isinstance(cond, And):
            return conjoin(*(self.condition(c, index, context) for c in cond.items))
        if isinstance(cond, Or):
            return disjoin(*(self.condition(c, index, context) for c in cond.items))
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
                self.check_kind(lname, "string" if isinstance(rvalue, str) else "number", cond.pos)
            if lshift and isinstance(rvalue, str):
                raise WXQueryError("arithmetic on strings is not in the subset", cond.pos)
            value: float | str = rvalue if isinstance(rvalue, str) else float(rvalue) - lshift
            return DNF(any_of=((Atom(path=lname, op=op, value=value),),))
        if lkind != "path" or rkind != "path":
            raise WXQueryError("an aggregate value can only be compared with a constant", cond.pos)
        self.check_kind(lname, "number", cond.pos)
        self.check_kind(rvalue, "number", cond.pos)
        return DNF(any_of=((Atom(path=lname, minus=rvalue, op=op, value=float(rshift - lshift)),),))

    def _operand(self, operand, index: int | None, context: str | None) -> tuple[str, object, float]:
        """(``"path"``, predicate path, shift) | (``"agg"``, key, 0) | (``"literal"``, value, 0)."""
        scope = self.scope
        if isinstance(operand, Literal):
            return ("literal", operand.value, 0.0)
        if isinstance(operand, Shifted):
            kind, name, _ = self._operand(operand.path, index, context)
            if kind != "path":
                raise WXQueryError("arithmetic applies to element paths only", operand.pos)
            return ("path", name, operand.delta)
        if isinstance(operand, VarRef):
            binding = scope.binding(operand.name, operand.pos)
            if binding.kind != "let":
                raise WXQueryError(f"compare elements below ${operand.name}, not ${operand.name} itself",
                                   operand.pos)
            return ("agg", binding.let.aggregate.key, 0.0)
        assert isinstance(operand, PathExpr)
        if isinstance(operand.base, VarRef):
            binding = scope.binding(operand.base.name, operand.base.pos)
            if binding.kind not in ("item", "window"):
                raise WXQueryError(f"conditions may read paths below the stream items (${operand.base.name} "
                                   "is not a for variable over a stream)", operand.pos)
            which = binding.input
            start = scope.inputs[which].item_path
        elif isinstance(operand.base, StreamRef):
            raise WXQueryError("conditions read paths relative to a variable or a predicate's context",
                               operand.pos)
        else:
            if context is None or index is None:
                raise WXQueryError("a relative path is only allowed inside a predicate [...] or a window",
                                   operand.pos)
            which, start = index, context
        path = self.leaf_path(which, start, operand, numeric=None)
        scope.paths[which].add(path)
        return ("path", qualify(scope.inputs[which].stream, path) if scope.qualify else path, 0.0)

    def leaf_path(self, index: int, start: str, path: PathExpr, numeric: bool | None) -> str:
        """The absolute path of a compared element: it must hold text and occur once in every item."""
        dtd = self.scope.dtd(index)
        if path.absolute:
            full = absolute(tuple(s.name for s in path.steps))
        else:
            full = start + "".join(f"/{s.name}" for s in path.steps)
        for step in path.steps:
            if step.predicates:
                raise WXQueryError("predicates inside a compared path are not in the subset", step.pos)
        steps = split(full)
        if steps[:2] != (dtd.root, dtd.item) or dtd.resolve(dtd.item, steps[2:]) is None:
            raise WXQueryError(f"{full} is not an element of the items of stream "
                               f"{self.scope.inputs[index].stream!r}", path.pos)
        if not dtd.exactly_once(steps[2:]) or not dtd.is_leaf(steps[-1]):
            raise WXQueryError(f"{full} must hold text and occur exactly once in every item to be compared "
                               "(the subset's conditions are conditions on single values)", path.pos)
        if numeric:
            self.check_kind(full, "number", path.pos)
        self.scope.paths[index].add(full)
        return full

    def check_kind(self, path: str, kind: str, pos: Pos) -> None:
        """Refuse ``path`` compared as ``kind`` after being compared as the other kind."""
        seen = self._kinds.setdefault(path, (kind, pos))
        if seen[0] != kind:
            raise WXQueryError(f"{path} is compared as a {kind} here and as a {seen[0]} at {seen[1]}", pos)


# -- the result expression ----------------------------------------------------------------------------


class _Results:
    """What the query returns and under which condition: the output elements of each input's APT.

    ``outputs[i]`` maps a path of input ``i`` to the condition under which it is returned (for a join,
    the where conjuncts about that input alone); a windowed input returns ``window_outputs`` from its
    window and aggregate values under ``agg_contexts`` (by aggregate key); ``if_predicates`` holds the
    predicate of each ``if`` condition by the condition's id.
    """

    def __init__(self, scope: _Scope, conditions: _Conditions):
        self.scope = scope
        self._conditions = conditions
        self.outputs: list[dict[str, DNF]] = [{} for _ in scope.inputs]
        self.window_outputs: set[str] = set()
        self.agg_contexts: dict[str, DNF] = {}
        self.if_predicates: dict[int, DNF] = {}
        self._join_local: list[DNF] = []

    def select_where(self, where: _Where) -> DNF:
        """Output what the for paths and ``where`` read; return the condition the result is built under."""
        inputs = self.scope.inputs
        if self.scope.windowed:
            return TRUE
        if len(inputs) == 1:
            context = conjoin(inputs[0].pre, where.item)
            self._add_outputs(0, self._local_paths(0, inputs[0].pre) | self._local_paths(0, where.item), context)
            return context
        self._join_local = [conjoin(TRUE, *(self._input_condition(i, part) for part in where.conjuncts))
                            for i in range(len(inputs))]
        for i in range(len(inputs)):
            self._add_outputs(i, self._local_paths(i, where.item), TRUE)
        return where.item

    def collect(self, expr: Expr, context: DNF) -> DNF:
        """Record what ``expr`` returns under ``context``; return when it returns an element or value.

        A constructed element must hold an element of the stream or an
        aggregate value whenever it is built (paper Sect. 2): its content
        must provide one under every condition of its context.
        """
        scope = self.scope
        if isinstance(expr, Element):
            provided = disjoin(FALSE, *(self.collect(child, context) for child in expr.content))
            if not implies(context, provided):
                raise WXQueryError(f"<{expr.tag}> may be returned without any element of the stream or aggregate "
                                   "value in it; the subset requires one in every result (Sect. 2)", expr.pos)
            return provided
        if isinstance(expr, Sequence):
            return disjoin(FALSE, *(self.collect(child, context) for child in expr.items))
        if isinstance(expr, IfExpr):
            cond = self._conditions.condition(expr.cond, None, None)
            if scope.windowed and any("(" not in p for p in cond.paths()):
                raise WXQueryError("inside the return of a windowed for, conditions may read aggregate values "
                                   "only (put conditions on the window's elements in where)", expr.cond.pos)
            self.if_predicates[id(expr.cond)] = cond
            if not scope.windowed:
                for i in range(len(scope.inputs)):
                    self._add_outputs(i, self._local_paths(i, cond), context if len(scope.inputs) == 1 else TRUE)
            then = self.collect(expr.then, conjoin(context, cond))
            orelse = self.collect(expr.orelse, conjoin(context, negate(cond)))
            return disjoin(conjoin(cond, then), conjoin(negate(cond), orelse))
        if isinstance(expr, VarRef):
            binding = scope.binding(expr.name, expr.pos)
            if binding.kind == "let":
                key = binding.let.aggregate.key
                self.agg_contexts[key] = disjoin(self.agg_contexts.get(key, FALSE), context)
            else:
                self._output(binding, scope.start(binding), context)
            return TRUE
        if isinstance(expr, PathExpr):
            return self._returned_path(expr, context)
        if isinstance(expr, FLWR):
            self._nested(expr, context)
            return FALSE
        raise WXQueryError("unsupported expression", getattr(expr, "pos", None))  # pragma: no cover

    def _returned_path(self, expr: PathExpr, context: DNF) -> DNF:
        """Output ``$x/path``; return true when every item has the element, else false."""
        scope = self.scope
        if not isinstance(expr.base, VarRef):
            raise WXQueryError("a returned path starts at a variable ($x/...)", expr.pos)
        binding = scope.binding(expr.base.name, expr.base.pos)
        if binding.kind == "let":
            raise WXQueryError(f"${expr.base.name} is an aggregate value; it has no elements", expr.pos)
        for step in expr.steps:
            if step.predicates:
                raise WXQueryError("predicates in returned paths are not in the subset; use "
                                   "if (...) then $x/path else ()", step.predicates[0].pos)
        start = scope.start(binding)
        full = start + "".join(f"/{s.name}" for s in expr.steps)
        dtd = scope.dtd(binding.input)
        if dtd.resolve(dtd.item, split(full)[2:]) is None:
            raise WXQueryError(f"{full} is not an element of the items of stream "
                               f"{scope.inputs[binding.input].stream!r}", expr.pos)
        self._output(binding, full, context)
        base = split(start)
        steps = split(full)[len(base):]
        required = all((occ := dtd.occurrence(parent, child)) is not None and occ.low >= 1
                       for parent, child in zip((base[-1],) + steps[:-1], steps))
        return TRUE if required else FALSE

    def _nested(self, flwr: FLWR, context: DNF) -> None:
        """``for $c in $x/path return ...`` inside the return: bind ``$c`` while collecting its result."""
        scope = self.scope
        if len(flwr.clauses) != 1 or not isinstance(flwr.clauses[0], ForClause) or flwr.where is not None:
            raise WXQueryError("a nested FLWR in the subset is one for over elements of an item, without "
                               "let or where: for $c in $x/path return ...", flwr.pos)
        clause = flwr.clauses[0]
        if clause.window is not None:
            raise WXQueryError("windows are only allowed on a for over a stream", clause.window.pos)
        source = clause.source
        if not isinstance(source.base, VarRef):
            raise WXQueryError("a nested for iterates over a path below a variable ($x/path)", source.pos)
        binding = scope.binding(source.base.name, source.base.pos)
        if binding.kind not in ("item", "node"):
            raise WXQueryError(f"a nested for iterates below an item or element variable, not "
                               f"${source.base.name}", source.pos)
        if any(s.predicates for s in source.steps):
            raise WXQueryError("predicates in a nested for path are not in the subset", source.pos)
        full = scope.start(binding) + "".join(f"/{s.name}" for s in source.steps)
        dtd = scope.dtd(binding.input)
        if dtd.resolve(dtd.item, split(full)[2:]) is None:
            raise WXQueryError(f"{full} is not an element of stream {scope.inputs[binding.input].stream!r}",
                               source.pos)
        scope.paths[binding.input].add(full)
        scope.bind(clause.var, _Binding("node", binding.input, full), clause.pos)
        self.collect(flwr.result, context)
        del scope.env[clause.var]

    def _output(self, binding: _Binding, path: str, context: DNF) -> None:
        """Output ``path`` below ``binding``: from the window, or as an element of the input's APT."""
        index = binding.input
        if binding.kind == "window":
            self.window_outputs.add(path)
            self.scope.paths[index].add(path)
        else:
            self._add_outputs(index, {path}, context if len(self.scope.inputs) == 1 else TRUE)

    def _add_outputs(self, index: int, paths: set[str], cond: DNF) -> None:
        """Output ``paths`` of input ``index`` under ``cond`` (one input) or its join-local condition."""
        local = cond if len(self.scope.inputs) == 1 else self._join_local[index]
        outputs = self.outputs[index]
        for path in paths:
            self.scope.paths[index].add(path)
            outputs[path] = disjoin(outputs[path], local) if path in outputs else local

    def _local_paths(self, index: int, predicate: DNF) -> set[str]:
        """The element paths of input ``index`` that ``predicate`` reads, unqualified."""
        stream = self.scope.inputs[index].stream
        out = set()
        for p in predicate.paths():
            if p.startswith("stream("):
                if p.startswith(f'stream("{stream}")'):
                    out.add(p[len(f'stream("{stream}")'):])
            elif "(" not in p:
                out.add(p)
        return out

    def _input_condition(self, index: int, cond: DNF) -> DNF:
        """``cond`` unqualified if it reads input ``index`` alone, else true."""
        prefix = f'stream("{self.scope.inputs[index].stream}")'
        if all(all(a.path.startswith(prefix) and (a.minus is None or a.minus.startswith(prefix)) for a in c)
               for c in cond.any_of):
            return DNF(any_of=tuple(tuple(a.model_copy(update={
                "path": a.path[len(prefix):], "minus": a.minus[len(prefix):] if a.minus else None}) for a in c)
                for c in cond.any_of))
        return TRUE


# -- the abstraction ------------------------------------------------------------------------------------


def _abstraction(scope: _Scope, results: _Results, where: _Where) -> Abstraction:
    """One input: its APT; a join: an APF of one APT per input and the ⋈ of the conjuncts spanning both."""
    if len(scope.inputs) == 1:
        return _apt(scope, results, 0, where.post, where.having)
    trees = tuple(_apt(scope, results, i, TRUE, TRUE) for i in range(len(scope.inputs)))
    join = conjoin(TRUE, *(part for part in where.conjuncts if _spans(part)))
    parents = tuple(sorted(qualify(inp.stream, p) for i, inp in enumerate(scope.inputs)
                           for p in results.outputs[i]))
    return APF(trees=trees, join=JoinAnnotation(predicate=join, parents=parents))


def _apt(scope: _Scope, results: _Results, index: int, post: DNF, having: DNF) -> APT:
    """Input ``index``'s APT; a windowed single input's carries ``post`` and the aggregates under ``having``."""
    inp = scope.inputs[index]
    paths = set(scope.paths[index])
    if inp.window is None or len(scope.inputs) > 1:
        return build_apt(inp.stream, inp.dtd, paths, results.outputs[index], window=inp.window)
    window = inp.window.model_copy(update={"post": post})
    aggregates = []
    for let in scope.lets:
        agg = let.aggregate
        context = results.agg_contexts.get(agg.key)
        aggregates.append(agg.model_copy(update={
            "output": context is not None,
            "selection": conjoin(having, context) if context is not None else having,
        }))
    unique = tuple({a.key: a for a in aggregates}.values())
    outputs = {p: TRUE for p in results.window_outputs}
    return build_apt(inp.stream, inp.dtd, paths, outputs, window=window, aggregates=unique)


def _spans(predicate: DNF) -> bool:
    """Whether ``predicate`` reads more than one stream."""
    streams = set()
    for p in predicate.paths():
        streams.add(p.split(")")[0])
    return len(streams) > 1
