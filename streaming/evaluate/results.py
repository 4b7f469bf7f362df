"""Results (MTJNTs) and the live result set indexed by the tuples they contain."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator

__all__ = ["TupleRef", "EdgeRef", "Result", "Change", "ResultSet", "make_result"]

TupleRef = tuple[str, Any]
EdgeRef = tuple[TupleRef, TupleRef, str]


@dataclass(frozen=True, slots=True)
class Result:
    """One MTJNT: its tuples and its edges ``(holder tuple, referenced tuple, fk name)``, both sorted."""

    tuples: tuple[TupleRef, ...]
    edges: tuple[EdgeRef, ...]

    def to_json(self) -> dict[str, list]:
        return {"tuples": [list(t) for t in self.tuples], "edges": [[list(a), list(b), fk] for a, b, fk in self.edges]}


@dataclass(frozen=True, slots=True)
class Change:
    """A result that appeared (``add``) or disappeared (``remove``)."""

    type: str
    result: Result


def make_result(tuples: list[TupleRef], edges: list[EdgeRef]) -> Result | None:
    """The result of a joined tree, or None when a tuple is bound twice (not a tree of distinct tuples)."""
    if len(set(tuples)) != len(tuples):
        return None
    return Result(tuple(sorted(tuples)), tuple(sorted(edges)))


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


def _order(result: Result) -> tuple:
    return (result.tuples, result.edges)
