"""Window-based aggregates shared by subscribers with different windows (paper 002, Sect. 4.2-4.3).

A subscriber asks for ``aggregate(values)`` over a sliding window of size Δ
advanced by step μ: instance ``k`` covers ``[kμ - Δ, kμ)`` of event time (a
*time* window) or the items numbered ``kμ - Δ + 1 .. kμ`` (a *count* window).
Subscribers of the same source, aggregate and pre-selection share one
*relaxed* window (Δ̄, μ̄) computed by :func:`relax_window` (Alg. 1,
RELAXWINDOW): Δ̄ divides every Δ and μ̄ divides every μ and Δ̄, so each
subscriber instance is the union of Δ/Δ̄ consecutive, non-overlapping relaxed
instances (SELECTWINDOWS) and its value is combined from their partial
aggregates (count, sum, min, max: avg is sum/count). The relaxed instances
are computed once, from panes of length μ̄, whatever the number of subscribers.

>>> relax_window([(45, 30), (30, 20)])   # Example 4.1
(15, 5)
>>> serves((20, 10), (60, 40))           # q2's window serves q1's unchanged
True
"""

from __future__ import annotations

import math
import operator
from fractions import Fraction
from collections import deque
from dataclasses import dataclass
from typing import Any, Hashable, Iterable, Literal, Sequence

__all__ = [
    "AGGREGATES",
    "WINDOW_KINDS",
    "relax_window",
    "serves",
    "Partial",
    "WindowSubscriber",
    "Emission",
    "SharedWindowAggregator",
    "having_holds",
    "ceil_to",
    "last_end",
    "json_int",
    "rounded",
]

AGGREGATES = ("count", "sum", "avg", "min", "max")
WINDOW_KINDS = ("time", "count")
_COMPARE = {"=": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le,
            ">": operator.gt, ">=": operator.ge}


def _divisors(n: int) -> list[int]:
    """Divisors of ``n``, largest first."""
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]), reverse=True)


def _check(window: tuple[int, int]) -> tuple[int, int]:
    size, step = window
    for name, value in (("size", size), ("step", step)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"window {name} must be a positive integer, got {value!r}")
    return size, step


def relax_window(windows: Iterable[tuple[int, int]]) -> tuple[int, int]:
    """The relaxed window ``(Δ̄, μ̄)`` every given ``(Δ, μ)`` can be combined from (Alg. 1, n-ary).

    Candidates are the common divisors of the sizes and of the steps; the
    largest μ̄ is chosen (fewest relaxed instances: least traffic), then the
    largest Δ̄ with ``Δ̄ mod μ̄ = 0`` (least combining work). For two windows
    this is the paper's Algorithm 1; it always succeeds (worst case (1, 1)).
    """
    pairs = [_check(w) for w in windows]
    if not pairs:
        raise ValueError("relax_window needs at least one window")
    size_gcd = math.gcd(*(s for s, _ in pairs))
    step_gcd = math.gcd(*(m for _, m in pairs))
    sizes = _divisors(size_gcd)
    for step in _divisors(step_gcd):
        for size in sizes:
            if size < step:
                break
            if size % step == 0:
                return size, step
    raise AssertionError("unreachable: (1, 1) always qualifies")


def serves(stream: tuple[int, int], query: tuple[int, int]) -> bool:
    """Whether a stream window ``(Δ, μ)`` serves a query window ``(Δ', μ')`` unchanged (Sect. 4.2).

    ``Δ' mod Δ = 0``, ``Δ mod μ = 0`` and ``μ' mod μ = 0``: the query's
    instances are unions of whole, non-overlapping stream instances.
    """
    size, step = _check(stream)
    qsize, qstep = _check(query)
    return qsize % size == 0 and size % step == 0 and qstep % step == 0


#: every finite float is a whole number of these (the smallest subnormal, 2**-1074)
_FLOAT_UNITS = 1074
_INT64 = (-(2**63), 2**63 - 1)


def json_int(n: int) -> int | str:
    """An int as JSON takes it everywhere (orjson, JavaScript): itself within 64 bits, else its digits."""
    return n if _INT64[0] <= n <= _INT64[1] else str(n)


def rounded(exact: Fraction | int) -> float | None:
    """The float nearest ``exact``; None beyond the float range (±1.8e308), where no float and no JSON
    number holds it."""
    try:
        return float(exact)
    except OverflowError:
        return None


def _units(x: float) -> int:
    """A finite float as a whole number of 2**-1074."""
    numerator, denominator = x.as_integer_ratio()  # denominator: a power of 2, at most 2**1074
    return numerator << (_FLOAT_UNITS - denominator.bit_length() + 1)


class Partial:
    """Partial aggregate of a set of values: count, exact sum, min, max (avg = sum / count).

    The sum is exact (integers as ``int``, floats as a whole number of
    2**-1074, which every finite float is) and rounded once when read, so a
    value does not depend on how the items were split into panes and windows:
    a subscriber alone and the same subscriber sharing a relaxed window give
    identical numbers. An exact sum never overflows; read, a sum of ints is an
    int within 64 bits and a float beyond, and a sum beyond the float range
    is None (an avg never is: it lies between min and max).
    """

    __slots__ = ("count", "int_sum", "float_units", "min", "max")

    def __init__(self) -> None:
        self.count = 0
        self.int_sum = 0
        self.float_units: int | None = None  # None: no float value yet (the sum of ints stays an int)
        self.min: Any = None
        self.max: Any = None

    def add(self, value: Any) -> None:
        self.count += 1
        if value is None:
            return
        if isinstance(value, int):
            self.int_sum += value
        else:
            units = _units(float(value))
            self.float_units = units if self.float_units is None else self.float_units + units
        if self.min is None or value < self.min:
            self.min = value
        if self.max is None or value > self.max:
            self.max = value

    @classmethod
    def combine(cls, parts: Iterable["Partial"]) -> "Partial":
        out = cls()
        for p in parts:
            if not p.count:
                continue
            out.count += p.count
            out.int_sum += p.int_sum
            if p.float_units is not None:
                out.float_units = p.float_units + (out.float_units or 0)
            if p.min is not None and (out.min is None or p.min < out.min):
                out.min = p.min
            if p.max is not None and (out.max is None or p.max > out.max):
                out.max = p.max
        return out

    def to_json(self) -> list[Any]:
        """The partial as JSON (exact: sums beyond 64 bits as their digits)."""
        units = None if self.float_units is None else json_int(self.float_units)
        return [self.count, json_int(self.int_sum), units, self.min, self.max]

    @classmethod
    def from_json(cls, doc: list[Any]) -> "Partial":
        out = cls()
        out.count, int_sum, units, out.min, out.max = doc
        out.int_sum = int(int_sum)
        if isinstance(units, list):  # saved before sums were kept in units: the float partials (none: [])
            out.float_units = sum(_units(float(x)) for x in units) if units else None
        elif units is not None:
            out.float_units = int(units)
        return out

    def _exact_sum(self) -> Fraction:
        return self.int_sum + Fraction(self.float_units or 0, 2**_FLOAT_UNITS)

    def value(self, aggregate: str) -> Any:
        """The aggregate of the values (None for avg/min/max of an empty set, and for a sum beyond floats)."""
        if aggregate == "count":
            return self.count
        if aggregate == "sum":
            if self.float_units is None:
                return self.int_sum if json_int(self.int_sum) == self.int_sum else rounded(self.int_sum)
            return rounded(self._exact_sum())
        if aggregate == "avg":
            return rounded(self._exact_sum() / self.count) if self.count else None
        if aggregate == "min":
            return self.min
        if aggregate == "max":
            return self.max
        raise ValueError(f"unknown aggregate {aggregate!r}")


def having_holds(having: tuple[str, Any] | None, value: Any) -> bool:
    """Whether a window value passes the subscriber's post-selection (None never passes a test)."""
    if having is None:
        return True
    if value is None:
        return False
    op, bound = having
    return bool(_COMPARE[op](value, bound))


@dataclass(frozen=True, slots=True)
class WindowSubscriber:
    """One subscriber: window (size Δ, step μ), aggregate and optional ``having`` test ``(op, value)``."""

    key: Hashable
    size: int
    step: int
    aggregate: str
    having: tuple[str, Any] | None = None

    def __post_init__(self) -> None:
        _check((self.size, self.step))
        if self.aggregate not in AGGREGATES:
            raise ValueError(f"aggregate must be one of {', '.join(AGGREGATES)}, got {self.aggregate!r}")
        if self.having is not None and self.having[0] not in _COMPARE:
            raise ValueError(f"having needs a comparison {', '.join(_COMPARE)}, got {self.having[0]!r}")


@dataclass(frozen=True, slots=True)
class Emission:
    """One window value of one subscriber; ``window_end`` is kμ (event time, or item number)."""

    key: Hashable
    window_end: float
    value: Any


class SharedWindowAggregator:
    """Every subscriber's window values from one relaxed window's partials.

    ``kind`` is ``"time"`` (positions are event times; a window ending at
    ``E`` closes when :meth:`advance` reaches a time ``>= E``, and windows
    ending after the first time seen are emitted, partial or empty ones
    included) or ``"count"`` (positions are item numbers given by
    :meth:`add`; only full windows are emitted). ``relaxed`` defaults to
    :func:`relax_window` over the subscribers; a given one must divide them
    (sharing without widening passes the class's own window).
    """

    def __init__(self, kind: Literal["time", "count"], subscribers: Sequence[WindowSubscriber],
                 relaxed: tuple[int, int] | None = None):
        if kind not in WINDOW_KINDS:
            raise ValueError(f"window kind must be time or count, got {kind!r}")
        if not subscribers:
            raise ValueError("a shared window needs at least one subscriber")
        self.kind = kind
        self.subscribers = list(subscribers)
        self.relaxed = relaxed or relax_window([(s.size, s.step) for s in subscribers])
        size, step = _check(self.relaxed)
        if size % step:
            raise ValueError(f"relaxed window {self.relaxed}: its size must be a multiple of its step")
        for s in self.subscribers:
            if s.size % size or s.step % step:
                raise ValueError(f"relaxed window {self.relaxed} does not divide subscriber window "
                                 f"({s.size}, {s.step})")
        self.pane = step
        self._panes_per_relaxed = size // step
        # relaxed instances kept: a subscriber window reaches back (Δ/Δ̄ - 1) relaxed sizes
        self._horizon = (max(s.size for s in self.subscribers) // size - 1) * self._panes_per_relaxed + 1
        self._pane_partials: deque[Partial] = deque(maxlen=self._panes_per_relaxed)
        self._relaxed: deque[Partial] = deque(maxlen=self._horizon)
        self._open = Partial()
        self._open_end: int | None = None  # end of the pane items go to
        self._items = 0
        self.relaxed_instances = 0

    # -- input ---------------------------------------------------------------------

    def add(self, position: float | None, value: Any) -> list[Emission]:
        """Take one item (time: at event time ``position``; count: numbered next); return closed windows."""
        if self.kind == "time":
            if position is None:
                raise ValueError("a time window needs the item's event time")
            out = self.advance(position)
            self._open.add(value)
            return out
        self._items += 1
        self._open.add(value)
        if self._items % self.pane == 0:
            return self._emissions(self._close_pane(self._items))
        return []

    def advance(self, now: float) -> list[Emission]:
        """Let event time reach ``now``: close (and emit) the time windows ending at or before it.

        Of the windows one call closes, a subscriber's empty ones are emitted
        only as the first and the last of them: a jump of the clock costs
        what the data costs, not one window per step of the jump.
        """
        if self.kind != "time":
            return []
        pane = self.pane
        if self._open_end is None:
            self._open_end = last_end(now, pane) + pane
            return []
        closed: list[tuple[WindowSubscriber, int, Partial]] = []
        while self._open_end <= now:
            end = self._open_end
            self._open_end = end + pane
            closed.extend(self._close_pane(end))
            if not self._open.count and self._quiet():
                # nothing in any kept pane: every later window up to now is empty
                closed.extend(self._quiet_windows(now))
        return self._emissions(closed)

    # -- relaxed instances and subscriber windows --------------------------------------

    def _close_pane(self, end: int) -> list[tuple[WindowSubscriber, int, Partial]]:
        self._pane_partials.append(self._open)
        self._open = Partial()
        if self.kind == "count" and end < self.relaxed[0]:
            return []
        self._relaxed.append(Partial.combine(self._pane_partials))
        self.relaxed_instances += 1
        return self._windows(end)

    def _windows(self, end: int) -> list[tuple[WindowSubscriber, int, Partial]]:
        """Each subscriber window ending at ``end``, with its partial aggregate."""
        out = []
        relaxed_size = self.relaxed[0]
        # relaxed instances ending at end, end - Δ̄, ...: every (Δ̄/μ̄)-th kept one, newest first
        stride = self._panes_per_relaxed
        kept = self._relaxed
        last = len(kept) - 1
        for s in self.subscribers:
            if end % s.step:
                continue
            if self.kind == "count" and end < s.size:
                continue
            n = s.size // relaxed_size
            out.append((s, end, Partial.combine(kept[last - i * stride] for i in range(n) if last - i * stride >= 0)))
        return out

    @staticmethod
    def _emissions(windows: list[tuple[WindowSubscriber, int, Partial]]) -> list[Emission]:
        """The values of windows closed together that pass their ``having``; of a subscriber's empty
        windows among them only the first and the last."""
        kept: list[tuple[WindowSubscriber, int, Partial]] = []
        first_empty: set[Hashable] = set()
        held: dict[Hashable, tuple[WindowSubscriber, int, Partial]] = {}  # each subscriber's last empty one
        for window in windows:
            s, _, partial = window
            if not partial.count:
                if s.key in first_empty:
                    held[s.key] = window
                    continue
                first_empty.add(s.key)
            kept.append(window)
        kept.extend(held.values())
        out = []
        for s, end, partial in kept:
            value = partial.value(s.aggregate)
            if having_holds(s.having, value):
                out.append(Emission(s.key, end, value))
        return out

    def _quiet(self) -> bool:
        """Whether every kept pane and relaxed instance is empty (so every window up to now is)."""
        return all(not p.count for p in self._pane_partials) and all(not p.count for p in self._relaxed)

    def _quiet_windows(self, now: float) -> list[tuple[WindowSubscriber, int, Partial]]:
        """With nothing kept, each subscriber's first and last (empty) window ending by ``now``, without
        closing each pane in between."""
        pane = self.pane
        last = last_end(now, pane)
        if last < self._open_end:
            return []
        empty = Partial()
        out = []
        for s in self.subscribers:
            first, final = ceil_to(self._open_end, s.step), last // s.step * s.step
            out += [(s, end, empty) for end in sorted({first, final}) if first <= end <= final]
        out.sort(key=lambda window: window[1])
        self._open_end = last + pane
        return out

    def state(self) -> dict[str, Any]:
        """Everything that changes as items arrive (JSON), for :meth:`restore` after a restart."""
        return {"relaxed": list(self.relaxed), "panes": [p.to_json() for p in self._pane_partials],
                "instances": [p.to_json() for p in self._relaxed], "open": self._open.to_json(),
                "open_end": None if self._open_end is None else json_int(self._open_end), "items": self._items,
                "relaxed_instances": self.relaxed_instances}

    def restore(self, state: dict[str, Any]) -> None:
        """Take back a :meth:`state` of an aggregator with the same subscribers and relaxed window."""
        if tuple(state["relaxed"]) != tuple(self.relaxed):
            raise ValueError(f"a state of relaxed window {state['relaxed']} for {self.relaxed}")
        self._pane_partials.clear()
        self._pane_partials.extend(Partial.from_json(p) for p in state["panes"])
        self._relaxed.clear()
        self._relaxed.extend(Partial.from_json(p) for p in state["instances"])
        self._open = Partial.from_json(state["open"])
        self._open_end = None if state["open_end"] is None else int(state["open_end"])
        self._items = state["items"]
        self.relaxed_instances = state["relaxed_instances"]

    @property
    def next_close(self) -> float | None:
        """The event time at which the next time window closes (None: count windows, or not started)."""
        return self._open_end if self.kind == "time" else None

    def stats(self) -> dict[str, Any]:
        return {"kind": self.kind, "relaxed": list(self.relaxed), "subscribers": len(self.subscribers),
                "relaxed_instances": self.relaxed_instances}


def ceil_to(value: int, step: int) -> int:
    """The first multiple of ``step`` at or after the integer ``value``."""
    return -(-value // step) * step


def last_end(position: float, step: int) -> int:
    """The last multiple of ``step`` at or before ``position``, exactly: the float quotient
    ``position / step`` is rounded, by many steps once positions pass 2**53 steps.

    >>> last_end(119.5, 60), last_end(-0.5, 60), last_end(1e300, 7) <= 1e300 < last_end(1e300, 7) + 7
    (60, -60, True)
    """
    numerator, denominator = position.as_integer_ratio()
    return numerator // (denominator * step) * step
