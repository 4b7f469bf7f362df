"""Placing a stream's sharing classes on several evaluators, and moving them without loss (issue 10).

A stream may run on ``n`` evaluator processes. Its queries are placed in
*units*: the queries of one keyword set and output kind (under ``widen``
exactly one sharing class; under ``match`` the classes of one keyword set,
which share a vocabulary and a lattice shape). Every evaluator of the stream
reads the whole stream and keeps the whole store (``EvaluatorPlan.others``);
it evaluates only the units placed on it.

**Cost.** A unit's cost is its measured work: the seconds its classes spent
evaluating ops (``busy_seconds`` in the evaluators' sharing reports) per op
applied. A unit not measured yet is estimated at the mean cost per query of
the measured ones times its query count (1 per query when nothing is
measured).

**Rule** (:func:`place`). New units go, largest first, to the evaluator
with the least estimated load; units of an evaluator that is retired, or
no longer exists, move the same way, and a move to or from one is dropped. Then, if the most loaded evaluator
carries more than ``1 + imbalance`` times the mean load, its smallest unit
whose move lowers the maximum moves to the least loaded one. A unit that
feeds an aggregate subscription (query source) stays where it is (the
window state lives in that evaluator), and relation-source aggregates and
WXQuery subscriptions run on the primary. One move at a time per stream.

**Moving a unit without losing or duplicating a change** (make before
break): the target gets the unit's queries as ``handoff.joining`` (from
``handoff.source``) and builds their classes over its own store, which
equals the source's; from then on both evaluate them, and the publish
script drops the changes of the one behind (``bus``: a change whose seq is
below the query's published seq adds nothing). The target records the seq
it joined at, and holds the queries' changes until the source has
*published* through that seq (``StateField.PUBLISHED``;
:class:`~streaming.handoff.ArrivingQueries` keeps both): a target ahead of
its source would otherwise publish a later change first, and the script
would then drop the source's earlier ones. Once the source has published
through that seq (:func:`handoff_complete`), the source's plan drops the
queries as ``handoff.leaving`` (no removes published), the target publishes
what it still holds, and the unit belongs to the target alone.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from .schema import Schema
from .sharing.properties import EvaluatorPlan, Handoff, QueryEntry, QuerySource, RelationSource, query_properties

__all__ = ["Unit", "Move", "Placement", "units_of", "unit_costs", "place", "handoff_complete",
           "evaluator_plans"]

#: a unit's key: its keyword set (sorted, casefolded) and output kind
UnitKey = tuple[tuple[str, ...], str]


@dataclass(frozen=True)
class Unit:
    """The queries of one keyword set and output kind, in registration (id) order."""

    key: UnitKey
    queries: tuple[int, ...]

    @property
    def label(self) -> str:
        words, output = self.key
        return " ".join(words) if words else f"({output})"


@dataclass(frozen=True)
class Move:
    """A unit moving from evaluator ``source`` to ``target``; ``done`` once the source handed it over."""

    queries: tuple[int, ...]
    source: int
    target: int
    done: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"queries": list(self.queries), "source": self.source, "target": self.target, "done": self.done}

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> "Move":
        return cls(tuple(obj["queries"]), obj["source"], obj["target"], bool(obj.get("done", False)))


@dataclass
class Placement:
    """Where each query runs (query id -> evaluator id) and the move in progress (or last done)."""

    assignment: dict[int, int] = field(default_factory=dict)
    move: Move | None = None

    def to_json(self) -> dict[str, Any]:
        return {"assignment": {str(q): e for q, e in sorted(self.assignment.items())},
                "move": self.move.to_json() if self.move else None}

    @classmethod
    def from_json(cls, obj: Mapping[str, Any] | None) -> "Placement":
        if not obj:
            return cls()
        move = obj.get("move")
        return cls({int(q): int(e) for q, e in obj.get("assignment", {}).items()},
                   Move.from_json(move) if move else None)

    @property
    def moving(self) -> bool:
        return self.move is not None and not self.move.done


def units_of(queries: Iterable[QueryEntry], schema: Schema) -> list[Unit]:
    """The stream's placement units, in the order of their first query; a query that does not compile
    is a unit of its own (its evaluator reports the error)."""
    groups: dict[UnitKey, list[int]] = {}
    for entry in queries:
        try:
            props = query_properties(entry, schema)
            key: UnitKey = (tuple(sorted(props.keywords)), props.output)
        except ValueError:
            key = ((f"#{entry.id}",), "error")
        groups.setdefault(key, []).append(entry.id)
    return [Unit(key, tuple(ids)) for key, ids in groups.items()]


def unit_costs(units: Sequence[Unit], reports: Iterable[Mapping[str, Any]]) -> dict[UnitKey, float]:
    """Each unit's cost in seconds of evaluation per op, from the evaluators' sharing reports
    (``SharingReport`` as dicts: ``classes`` with ``members`` and ``busy_seconds``, ``totals.ops``)."""
    per_query: dict[int, float] = {}
    for report in reports:
        ops = report.get("totals", {}).get("ops") or 0
        if not ops:
            continue
        for cls in report.get("classes", []):
            members = cls.get("members") or []
            for qid in members:
                per_query[qid] = cls.get("busy_seconds", 0.0) / ops / len(members)
    default = sum(per_query.values()) / len(per_query) if per_query else 1.0
    return {u.key: sum(per_query.get(q, default) for q in u.queries) for u in units}


def place(units: Sequence[Unit], costs: Mapping[UnitKey, float], evaluators: Sequence[int],
          current: Placement, pinned: Iterable[int] = (), imbalance: float = 0.5) -> Placement:
    """The new placement by the module's rule (a pure function; ``current`` is not changed).

    ``evaluators`` are the live evaluator ids, the primary first; ``pinned``
    the queries that must not move (they feed an aggregate subscription).
    """
    if not evaluators:
        raise ValueError("a stream needs at least one evaluator")
    pinned = set(pinned)
    load = {e: 0.0 for e in evaluators}
    assignment: dict[int, int] = {}
    move = current.move
    if current.moving and move is not None and not {move.source, move.target} <= set(load):
        # an end of the move is retired: it cannot finish, and its queries stay on (or leave) their evaluator
        current, move = Placement(current.assignment), None
    unplaced: list[Unit] = []
    for unit in units:
        where = {current.assignment.get(q) for q in unit.queries} - {None}
        home = min(where) if len(where) == 1 else None
        if current.moving and move is not None and set(move.queries) & set(unit.queries):
            home = move.source
        if home in load:
            for q in unit.queries:
                assignment[q] = home
            load[home] += costs[unit.key]
        else:
            unplaced.append(unit)
    if current.moving:  # one move at a time: place only what has no evaluator
        _fill(unplaced, costs, load, assignment)
        return Placement(assignment, move)
    orphans = [u for u in unplaced if any(q in current.assignment for q in u.queries)]
    fresh = [u for u in unplaced if u not in orphans]
    _fill(fresh, costs, load, assignment)
    # a unit whose evaluator is gone is placed at once: nobody evaluates it that could hand it over
    _fill(orphans, costs, load, assignment)
    new_move = _rebalance(units, costs, load, assignment, pinned, imbalance)
    return Placement(assignment, new_move or move)


def _fill(units: Sequence[Unit], costs: Mapping[UnitKey, float], load: dict[int, float],
          assignment: dict[int, int]) -> None:
    for unit in sorted(units, key=lambda u: (-costs[u.key], u.queries)):
        target = min(load, key=lambda e: (load[e], e))
        for q in unit.queries:
            assignment[q] = target
        load[target] += costs[unit.key]


def _rebalance(units: Sequence[Unit], costs: Mapping[UnitKey, float], load: dict[int, float],
               assignment: dict[int, int], pinned: set[int], imbalance: float) -> Move | None:
    if len(load) < 2:
        return None
    mean = sum(load.values()) / len(load)
    heaviest = max(load, key=lambda e: (load[e], -e))
    lightest = min(load, key=lambda e: (load[e], e))
    if mean <= 0 or load[heaviest] <= (1 + imbalance) * mean:
        return None
    movable = [u for u in units if assignment.get(u.queries[0]) == heaviest and not pinned & set(u.queries)]
    for unit in sorted(movable, key=lambda u: (costs[u.key], u.queries)):
        cost = costs[unit.key]
        if max(load[heaviest] - cost, load[lightest] + cost) < load[heaviest]:
            return Move(unit.queries, heaviest, lightest)
    return None


def handoff_complete(move: Move, joined: Mapping[int, int], source_published: int) -> bool:
    """Whether the source may drop the moving queries: the target joined each of them (``joined``:
    query -> the seq it joined at, from the target's state) and the source has published its changes
    through that seq (``source_published``; applied and saved is not enough: it saves before it publishes)."""
    return all(q in joined for q in move.queries) and source_published >= max(joined[q] for q in move.queries)


def evaluator_plans(full: EvaluatorPlan, evaluators: Sequence[int], placement: Placement,
                    versions: Mapping[int, int]) -> dict[int, EvaluatorPlan]:
    """Each evaluator's plan from the stream's whole plan (``full``: every query, aggregate and
    subscription, as ``build_plan`` makes it for the primary, ``evaluators[0]``).

    Queries go where ``placement`` puts them (a query it does not place runs
    on the primary); during a move the target also runs the moving queries
    (``handoff.joining``), after it the source lists them as
    ``handoff.leaving``. An aggregate subscription runs with its source
    query, a relation-source one on the primary.
    """
    primary = evaluators[0]
    move = placement.move
    moving = set(move.queries) if move is not None else set()
    plans = {}
    for e in evaluators:
        mine: list[QueryEntry] = []
        others: list[QueryEntry] = []
        for q in full.queries:
            home = placement.assignment.get(q.id, primary)
            if home not in evaluators:
                home = primary
            runs_here = home == e or (move is not None and not move.done and q.id in moving and move.target == e)
            (mine if runs_here else others).append(q)
        ids = {q.id for q in mine}
        aggregates = [a for a in full.aggregates
                      if (isinstance(a.source, QuerySource) and a.source.query in ids)
                      or (isinstance(a.source, RelationSource) and e == primary)]
        joining = sorted(moving & ids) if move is not None and move.target == e and not move.done else []
        leaving = sorted(moving - ids) if move is not None and move.source == e and move.done else []
        source = move.source if move is not None and joining else None
        plans[e] = EvaluatorPlan(version=versions[e], evaluator=e, stream=full.stream, queries=mine, others=others,
                                 aggregates=aggregates, subscriptions=full.subscriptions if e == primary else [],
                                 narrow=full.narrow, primary=e == primary,
                                 handoff=Handoff(joining=joining, leaving=leaving, source=source), frozen=full.frozen)
    return plans
