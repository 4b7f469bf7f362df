"""Accepting XML items into an XML stream: safe parsing, DTD validation, mapping to ops, per-item dead letters.

A body is a document of the stream's root element holding items
(``<photons><photon>...</photon>...</photons>``). Items are read by
``streaming.xmlstream.items.parse_items`` (nothing expanded or fetched,
size and depth limits, validation against the stream's DTD); each accepted
item is mapped by the stream's declared mapping into insert ops. For every
item the stream's source receives, in one write (so they get consecutive
seqs), its item op ``{"op":"item","xml":...,"ts":...}`` (what the stream's
WXQuery subscriptions read) followed by its inserts (what keyword queries and
filter subscriptions read), all at the item's ``ts``. A refused item (by the
DTD, the mapping, or the stream's clock guard, judged per item under the
landing lock as the NDJSON ingest judges lines) is a dead letter with its
reason, published like the NDJSON ingest's; the others are kept.

Generated keys (a mapped relation whose key is not an element) continue from
the stream's ``xml_next_keys``, updated under a row lock in the same
transaction as the write, so concurrent requests never hand out a key twice.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import orjson
from django.conf import settings
from django.db import transaction
from lxml import etree

from streaming.ops import OpRejected, item_op, parse_op
from streaming.xmlstream.items import XmlLimits, parse_items
from streaming.xmlstream.mapping import ItemMapper, MappingError

from kwmonitor.streams.models import Stream

from .service import BodyKey, Ingestor, LineError

__all__ = ["ItemError", "XmlIngestResult", "XmlIngestor"]


@dataclass(frozen=True)
class ItemError:
    """A refused item (``index``: 0-based among the body's items; None: the rest of the body) and why."""

    index: int | None
    line: int | None
    reason: str

    def to_json(self) -> dict[str, Any]:
        return {"index": self.index, "line": self.line, "reason": self.reason}


@dataclass
class XmlIngestResult:
    """Accepted items, the seqs of the ops they became, and the refused items."""

    accepted: int = 0
    seqs: list[int] = field(default_factory=list)
    errors: list[ItemError] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "accepted": self.accepted,
            "rejected": len(self.errors),
            "ops": len(self.seqs),
            "first_seq": self.seqs[0] if self.seqs else None,
            "last_seq": self.seqs[-1] if self.seqs else None,
            "errors": [e.to_json() for e in self.errors],
        }


def _text(element: etree._Element) -> str:
    return etree.tostring(element, encoding="unicode", with_tail=False)


class XmlIngestor:
    """Reads XML bodies into one XML stream's source."""

    def __init__(self, stream: Stream):
        self.stream = stream
        self.dtd = stream.stream_dtd()
        self.mapping = stream.item_mapping()
        self.lines = Ingestor(stream)  # the stream's schema, Redis client, writer and dead-letter publishing

    def ingest(self, body: bytes, key: BodyKey | None = None) -> XmlIngestResult:
        """Parse, validate and map ``body``; write the accepted items' ops; publish the refused ones.

        Raises :class:`~streaming.xmlstream.items.BodyRejected` when the body is refused whole, and with an
        idempotency ``key`` :class:`~kwmonitor.ingest.service.AlreadyStored` or
        :class:`~kwmonitor.ingest.service.KeyReused` (nothing stored: the item keys are not advanced).
        """
        parsed = parse_items(body, self.dtd, XmlLimits(max_bytes=settings.INGEST_MAX_BYTES))
        errors = [ItemError(d.index, d.line, d.reason) for d in parsed.dead_letters]
        letters = [LineError(d.line or 0, self._where(d.index, d.line, d.reason), "") for d in parsed.dead_letters]
        result = XmlIngestResult()
        arrival = time.time()
        with transaction.atomic():
            row = Stream.objects.select_for_update().only("xml_next_keys").get(pk=self.stream.pk)
            mapper = ItemMapper(self.mapping, self.dtd, {k: int(v) for k, v in (row.xml_next_keys or {}).items()})
            units: list[tuple[float, list[str]]] = []
            kept: list[tuple[int, int | None, str]] = []  # (index, line, text) of each unit's item
            for item in parsed.items:
                text = _text(item.element)
                line = item.element.sourceline
                try:
                    units.append(self._ops(mapper, item.element, text, arrival))
                except (MappingError, OpRejected) as exc:
                    errors.append(ItemError(item.index, line, str(exc)))
                    letters.append(LineError(line or 0, self._where(item.index, line, str(exc)), text))
                    continue
                kept.append((item.index, line, text))

            def refused(i: int, reason: str) -> LineError:
                index, line, text = kept[i]
                errors.append(ItemError(index, line, reason))
                return LineError(line or 0, self._where(index, line, reason), text)

            # dead letters first and the clock guard under the landing lock, as the NDJSON ingest
            result.seqs, guarded = self.lines.store(units, letters, refused, key)
            result.accepted = len(units) - len(guarded)
            errors.sort(key=lambda e: (e.index is None, e.index or 0))
            result.errors = errors
            row.xml_next_keys = mapper.next_keys
            row.save(update_fields=["xml_next_keys"])
        self.lines.record_input(len(result.seqs))
        self.lines.record_answer(key, result.seqs, result.to_json())
        return result

    def _ops(self, mapper: ItemMapper, element: etree._Element, text: str, arrival: float) -> tuple[float, list[str]]:
        """The ``ts`` of one item and its item op and mapped inserts (compact JSON), each valid for the
        stream's schema."""
        inserts = mapper.ops(element, arrival)
        for op in inserts:
            parse_op(op, self.lines.schema)
        ts = inserts[0]["ts"] if inserts else arrival
        return ts, [orjson.dumps(op).decode() for op in [item_op(text, ts), *inserts]]

    @staticmethod
    def _where(index: int | None, line: int | None, reason: str) -> str:
        place = f"item {index}" if index is not None else "body"
        return f"{place}{f' (line {line})' if line else ''}: {reason}"
