"""The WXQuery subscriptions of one XML stream inside its evaluator, fed the stream's item ops one by one.

The evaluator's plan carries the stream's DTD and its subscriptions (id and
text). :class:`StreamSubscriptions` compiles them against the DTD (a
subscription that does not compile is reported in ``errors`` and left out, the
others run), registers them in id order with the sharing mode ``widen`` and
evaluates each item with :class:`~streaming.wxquery.run.SubscriptionRun`, the
machinery of ``python -m streaming wxquery run``, so a subscription's results
are the command line's on the same items.

A subscription reads the stream by its name (``stream("photons")``): one
reading another stream is an error. Registration is done once for the whole
set; when the set or the DTD changes, the evaluator builds a new instance and
the windows start empty (items seen before are not replayed).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from lxml import etree

from ..xmlstream.dtd import DTDError, StreamDTD
from .parser import WXQueryError
from .planner import Mode
from .run import SubscriptionRun
from .translate import Subscription, compile_text

__all__ = ["LiveResult", "StreamSubscriptions", "compile_for_stream", "item_element"]

_PARSER = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False, huge_tree=False)


@dataclass(frozen=True)
class LiveResult:
    """What one item produced: each subscription's new result items (by id), or why the item was refused."""

    results: dict[int, list[str]]
    reason: str | None = None


def compile_for_stream(text: str, stream: str, dtd: StreamDTD) -> Subscription:
    """Compile a subscription of stream ``stream``; :class:`WXQueryError` (with its place) if it reads another."""
    return compile_text(text, lambda name: dtd if name == stream else None)


def item_element(xml: str) -> etree._Element:
    """An item as the XML ingest stored it (no entity is ever expanded, nothing fetched)."""
    return etree.fromstring(xml.encode("utf-8"), _PARSER)


class StreamSubscriptions:
    """Compiled subscriptions of one stream, evaluated together over its items."""

    def __init__(self, stream: str, dtd_text: str, entries: Sequence[tuple[int, str]], mode: Mode = "widen"):
        self.stream = stream
        self.key = (dtd_text, tuple(entries))
        self.errors: dict[int, str] = {}
        compiled: list[tuple[str, Subscription]] = []
        try:
            dtd = StreamDTD.from_text(dtd_text)
        except DTDError as exc:
            self.errors = {sid: f"the stream's DTD: {exc}" for sid, _ in entries}
        else:
            for sid, text in sorted(entries):
                try:
                    compiled.append((str(sid), compile_for_stream(text, stream, dtd)))
                except WXQueryError as exc:
                    self.errors[sid] = str(exc)
        self.ids = [int(name) for name, _ in compiled]
        self.run = SubscriptionRun(compiled, mode, lambda _name: dtd) if compiled else None

    def push(self, index: int, xml: str) -> LiveResult:
        """Evaluate one item (its XML text); ``index`` numbers it in dead letters (the op's seq)."""
        if self.run is None:
            return LiveResult({})
        try:
            item = item_element(xml)
        except etree.XMLSyntaxError as exc:
            return LiveResult({}, f"the stored item is not well-formed XML: {exc}")
        found, letter = self.run.push(index, self.stream, item)
        if letter is not None:
            return LiveResult({}, letter.reason)
        return LiveResult({int(name): rows for name, rows in found.items()})

    def stats(self) -> dict[str, object]:
        """Subscriptions running and in error, items seen, groups and stream bytes of the shared evaluation."""
        base: dict[str, object] = {"subscriptions": len(self.ids), "errors": {str(k): v for k, v in self.errors.items()}}
        if self.run is not None:
            stats = self.run.stats()
            base.update(items=stats["items"], dead_letters=stats["dead_letters"],
                        subscriptions_sharing=stats["subscriptions_sharing"], groups=len(stats["groups"]),
                        stream_bytes=stats["stream_bytes"], input_bytes=stats["input_bytes"])
        return base
