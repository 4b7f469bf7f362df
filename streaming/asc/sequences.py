"""Evaluation sequences of ASCs (Sects. 4.2, 4.3): the order the evaluators follow and its JSON form.

A :class:`Sequence` is a macro order of every ASC plus, for a hybrid
sequence, micro-arrows ``(ASC i, region r) -> ASC j``. The monitor finds
them from a sample (:mod:`.sequence_search`); the driver broadcasts them as
JSON and the evaluators (:mod:`.vectorised`, :mod:`.evaluate`) follow them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from .construct import AscIndex
from .predicates import PredicateError

__all__ = ["Sequence"]

KINDS = ("macro", "hybrid", "fixed")


@dataclass(frozen=True)
class Sequence:
    """An evaluation order: ``order`` lists every ASC position once; ``micro``
    maps ``(asc, region)`` to the next ASC."""

    kind: str
    order: tuple[int, ...]
    micro: Mapping[tuple[int, int], int] = field(default_factory=dict)

    def names(self, index: AscIndex) -> list[str]:
        """The macro order as attribute names."""
        return [index.ascs[i].attribute for i in self.order]

    def to_json(self, index: AscIndex) -> dict[str, Any]:
        """JSON form, by attribute names: ``{"kind", "order", "micro": [[a, r, b], ...]}``."""
        micro = [[index.ascs[i].attribute, r, index.ascs[j].attribute] for (i, r), j in sorted(self.micro.items())]
        return {"kind": self.kind, "order": self.names(index), "micro": micro}

    @classmethod
    def from_json(cls, doc: Mapping[str, Any], index: AscIndex) -> "Sequence":
        """Inverse of :meth:`to_json`; raises ``PredicateError`` for a bad document."""
        kind = doc.get("kind")
        if kind not in KINDS:
            raise PredicateError(f"sequence.kind: {kind!r} is not one of {', '.join(KINDS)}")
        seq = cls.fixed(index, doc.get("order", []))
        micro: dict[tuple[int, int], int] = {}
        for k, arrow in enumerate(doc.get("micro", [])):
            if not (isinstance(arrow, list) and len(arrow) == 3):
                raise PredicateError(f"sequence.micro[{k}]: expected [attribute, region, attribute]")
            i, j = (_position(index, a, f"sequence.micro[{k}]") for a in (arrow[0], arrow[2]))
            r = arrow[1]
            if not isinstance(r, int) or not 0 <= r < index.ascs[i].regions or i == j:
                raise PredicateError(f"sequence.micro[{k}]: bad region or arrow {arrow!r}")
            micro[(i, r)] = j
        return cls(kind, seq.order, micro)

    @classmethod
    def fixed(cls, index: AscIndex, names: Iterable[str]) -> "Sequence":
        """A fixed sequence naming every p-attribute once (case-insensitive if unambiguous)."""
        order = [_position(index, a, "sequence") for a in names]
        if len(set(order)) != len(order):
            raise PredicateError("sequence: an attribute is named twice")
        missing = [a.attribute for a in index.ascs if a.position not in order]
        if missing:
            raise PredicateError(f"sequence: missing p-attribute(s) {', '.join(missing)}")
        return cls("fixed", tuple(order))


def _position(index: AscIndex, name: Any, where: str) -> int:
    if name in index.position:
        return index.position[name]
    folded = [a.position for a in index.ascs if isinstance(name, str) and a.attribute.casefold() == name.casefold()]
    if len(folded) == 1:
        return folded[0]
    raise PredicateError(f"{where}: {name!r} is not a p-attribute (one of {', '.join(index.position)})")
