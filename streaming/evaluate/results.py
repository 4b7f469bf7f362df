"""Results (MTJNTs) and the live result set indexed by the tuples they contain."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator

__all__ = ["TupleRef", "EdgeRef", "Result", "Change", "ResultSet", "SharedResults", "make_result"]

TupleRef = tuple[str, Any]
EdgeRef = tuple[TupleRef, TupleRef, str]


class Result:
    """One MTJNT: its tuples and its edges ``(holder tuple, referenced tuple, fk name)``, both sorted.

    Immutable, compared by value, and hashed once: results are hashed all
    the time (live sets, deliveries, encodings), and a tuple of tuples would
    be hashed anew each time.
    """

    __slots__ = ("tuples", "edges", "_hash")

    def __init__(self, tuples: tuple[TupleRef, ...], edges: tuple[EdgeRef, ...]):
        self.tuples = tuples
        self.edges = edges
        self._hash = hash((tuples, edges))

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Result):
            return NotImplemented
        return self._hash == hash(other) and self.tuples == other.tuples and self.edges == other.edges

    def __repr__(self) -> str:
        return f"Result(tuples={self.tuples!r}, edges={self.edges!r})"

    def to_json(self) -> dict[str, list]:
        return {"tuples": [list(t) for t in self.tuples], "edges": [[list(a), list(b), fk] for a, b, fk in self.edges]}


@dataclass(frozen=True, slots=True)
class Change:
    """A result that appeared (``add``) or disappeared (``remove``)."""

    type: str
    result: Result


def make_result(tuples: list[TupleRef], edges: list[EdgeRef]) -> Result | None:
    """The result of a joined tree, or None when a tuple is bound twice (not a tree of distinct tuples).
    Sorts the two lists it is given (the joins hand over lists of their own)."""
    tuples.sort()
    for i in range(1, len(tuples)):
        if tuples[i] == tuples[i - 1]:
            return None
    edges.sort()
    result = Result.__new__(Result)  # compiled: no call through __init__'s arguments
    result.tuples = tuple(tuples)
    result.edges = tuple(edges)
    result._hash = hash((result.tuples, result.edges))
    return result


class ResultSet:
    """Live results, with ``by_tuple`` so deleting a tuple finds its results directly."""

    def __init__(self) -> None:
        self.live: set[Result] = set()
        self.by_tuple: dict[TupleRef, set[Result]] = {}

    def __len__(self) -> int:
        return len(self.live)

    def __iter__(self) -> Iterator[Result]:
        return iter(self.live)

    def add(self, result: Result) -> bool:
        """Record a result; False if it was already live."""
        if result in self.live:
            return False
        self.live.add(result)
        by_tuple = self.by_tuple
        for ref in result.tuples:
            bucket = by_tuple.get(ref)
            if bucket is None:
                by_tuple[ref] = {result}
            else:
                bucket.add(result)
        return True

    def remove_containing(self, ref: TupleRef) -> list[Result]:
        """Drop and return every live result that contains tuple ``ref``."""
        gone = self.by_tuple.pop(ref, None)
        if not gone:
            return []
        by_tuple = self.by_tuple
        for result in gone:
            self.live.discard(result)
            for other in result.tuples:
                if other != ref:
                    bucket = by_tuple[other]
                    bucket.discard(result)
                    if not bucket:
                        del by_tuple[other]
        return sorted(gone, key=_order)


class SharedResults:
    """Live results of several keyword sets (ids ``kid``), indexed by the tuples they contain.

    One tree of tuples may be a result of several keyword sets (a tuple
    holding *silk* and *dress* is one for ``{silk}``, ``{dress}`` and
    ``{silk, dress}``): ``by_tuple[ref][result]`` is the bitmask of the
    keyword sets holding it.
    """

    def __init__(self) -> None:
        self.of: dict[int, set[Result]] = {}
        self.by_tuple: dict[TupleRef, dict[Result, int]] = {}

    def __len__(self) -> int:
        return sum(len(s) for s in self.of.values())

    def add(self, kid: int, result: Result) -> bool:
        """Record a result of keyword set ``kid``; False if it was already live for it."""
        live = self.of.get(kid)
        if live is None:
            live = self.of[kid] = set()
        elif result in live:
            return False
        live.add(result)
        bit = 1 << kid
        by_tuple = self.by_tuple
        for ref in result.tuples:
            bucket = by_tuple.get(ref)
            if bucket is None:
                by_tuple[ref] = {result: bit}
            else:
                bucket[result] = bucket.get(result, 0) | bit
        return True

    def remove_containing(self, ref: TupleRef) -> list[tuple[int, Result]]:
        """Drop and return ``(kid, result)`` for every live result that contains tuple ``ref``."""
        gone = self.by_tuple.pop(ref, None)
        if not gone:
            return []
        by_tuple, of = self.by_tuple, self.of
        out: list[tuple[int, Result]] = []
        for result, kids in gone.items():
            for other in result.tuples:
                if other != ref:
                    bucket = by_tuple[other]
                    del bucket[result]
                    if not bucket:
                        del by_tuple[other]
            while kids:
                low = kids & -kids
                kids ^= low
                kid = low.bit_length() - 1
                of[kid].discard(result)
                out.append((kid, result))
        out.sort(key=_keyed_order)
        return out

    def drop(self, kid: int) -> None:
        """Forget every result of keyword set ``kid``."""
        keep = ~(1 << kid)
        by_tuple = self.by_tuple
        for result in self.of.pop(kid, ()):
            for ref in result.tuples:
                bucket = by_tuple[ref]
                kids = bucket[result] & keep
                if kids:
                    bucket[result] = kids
                else:
                    del bucket[result]
                    if not bucket:
                        del by_tuple[ref]


def _order(result: Result) -> tuple:
    return (result.tuples, result.edges)


def _keyed_order(item: tuple[int, Result]) -> tuple:
    return (item[1].tuples, item[1].edges, item[0])
