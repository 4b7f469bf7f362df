"""Safe parsing of a request of XML stream items, one dead letter per bad item.

A request body is a document whose root is the stream's root element and
whose children are items (``<photons><photon>...</photon>...</photons>``), or,
for several streams in one sequence, ``<interleaved>`` with children
``<item stream="ID">`` each holding one item of stream ``ID``.

Nothing in a body is ever expanded or fetched:

* A DOCTYPE in the body is read (by expat, up to the root element) only to
  learn the names of the entities it declares; it is then replaced by one that
  declares each of them as a marker. The stream's own DTD, registered
  beforehand, is what items are validated against.
* The document is parsed by lxml with entity resolution, DTD loading and
  network access off. An entity reference in an item's text stays an
  unexpanded node and one in an attribute value becomes the marker: either
  way the item is refused ("billion laughs", external entities), and the
  other items are kept.
* Items nested deeper, or with a longer text or attribute value, than
  :class:`XmlLimits` allows are refused; so is an item that is not valid
  against the DTD.
* A body larger than ``max_bytes`` is refused whole (:class:`BodyRejected`).
  If the body stops being well-formed XML (or nests deeper than the parser's
  own limit of 256 levels), the items before that point are kept and one dead
  letter says where reading stopped.
"""

from __future__ import annotations

import xml.parsers.expat
from dataclasses import dataclass, field
from typing import Callable, Mapping

from lxml import etree

from .dtd import StreamDTD

__all__ = ["XmlLimits", "DeadLetter", "ParsedItem", "ParsedItems", "BodyRejected", "parse_items", "INTERLEAVED"]

INTERLEAVED = "interleaved"
_MARK = "\ue000"
_CHUNK = 1 << 16


@dataclass(frozen=True)
class XmlLimits:
    """Per-request and per-item limits (defaults suit sensor-like items)."""

    max_bytes: int = 16 << 20
    max_items: int = 100_000
    max_depth: int = 32
    max_text: int = 1 << 16


@dataclass(frozen=True)
class DeadLetter:
    """A refused item (``index`` is its 0-based position among the body's items) or a refused rest of the body."""

    index: int | None
    line: int | None
    reason: str

    def to_dict(self) -> dict[str, object]:
        return {"index": self.index, "line": self.line, "reason": self.reason}


@dataclass(frozen=True)
class ParsedItem:
    index: int
    stream: str | None
    element: etree._Element = field(repr=False)


@dataclass
class ParsedItems:
    """The accepted items in body order, and a dead letter for each refused one."""

    items: list[ParsedItem] = field(default_factory=list)
    dead_letters: list[DeadLetter] = field(default_factory=list)


class BodyRejected(ValueError):
    """The whole body is refused (too large, or not readable at all); nothing was taken from it."""


DTDLookup = StreamDTD | Mapping[str, StreamDTD] | Callable[[str], StreamDTD | None]


def _prolog_entities(body: bytes) -> tuple[int, int, list[str]] | None:
    """The byte span of the DOCTYPE and the general entities it declares (expat, stopped at the root element)."""
    span: dict[str, int] = {}
    names: list[str] = []
    parser = xml.parsers.expat.ParserCreate()
    parser.SetParamEntityParsing(xml.parsers.expat.XML_PARAM_ENTITY_PARSING_NEVER)

    class _Root(Exception):
        pass

    def start_doctype(*_args: object) -> None:
        span["start"] = parser.CurrentByteIndex

    def end_doctype() -> None:
        span["end"] = parser.CurrentByteIndex

    def entity(name: str, is_parameter: int, *_rest: object) -> None:
        if not is_parameter:
            names.append(name)

    def start_element(*_args: object) -> None:
        raise _Root

    parser.StartDoctypeDeclHandler = start_doctype
    parser.EndDoctypeDeclHandler = end_doctype
    parser.EntityDeclHandler = entity
    parser.StartElementHandler = start_element
    try:
        parser.Parse(body, True)
    except _Root:
        pass
    except xml.parsers.expat.ExpatError as exc:
        if "start" in span and "end" not in span:
            raise BodyRejected(f"the DOCTYPE of the body cannot be read safely: {exc}") from None
        return None
    if "start" not in span or "end" not in span:
        return None
    start = body.rfind(b"<!DOCTYPE", 0, span["start"] + 1)
    end = body.index(b">", span["end"]) + 1
    return start, end, names


def _neutralized(body: bytes) -> bytes:
    """The body with its DOCTYPE replaced by one declaring each entity as a marker."""
    found = _prolog_entities(body)
    if found is None:
        return body
    start, end, names = found
    root = b"x"
    decls = "".join(f'<!ENTITY {n} "&#xE000;{n}&#xE000;">' for n in dict.fromkeys(names))
    head = body[:start]
    tail = body[end:]
    root_start = tail.find(b"<", 0)
    if root_start >= 0:
        root = tail[root_start + 1:].split(None, 1)[0].split(b">", 1)[0].split(b"/", 1)[0] or b"x"
    return head + b"<!DOCTYPE " + root + b" [" + decls.encode() + b"]>" + tail


def _dtd_for(dtds: DTDLookup, stream: str | None) -> StreamDTD | None:
    if isinstance(dtds, StreamDTD):
        return dtds
    if stream is None:
        return None
    return dtds(stream) if callable(dtds) else dtds.get(stream)


def parse_items(body: bytes | str, dtds: DTDLookup, limits: XmlLimits = XmlLimits()) -> ParsedItems:
    """Parse a request body into items; see the module docstring for what is refused and how."""
    raw = body.encode("utf-8") if isinstance(body, str) else bytes(body)
    if len(raw) > limits.max_bytes:
        raise BodyRejected(f"the body has {len(raw)} bytes, more than the limit of {limits.max_bytes}")
    raw = _neutralized(raw)
    parser = etree.XMLPullParser(events=("start", "end"), resolve_entities=False, no_network=True,
                                 load_dtd=False, huge_tree=False, remove_comments=True, remove_pis=True)
    reader = _Reader(dtds, limits)
    try:
        for offset in range(0, len(raw), _CHUNK):
            parser.feed(raw[offset:offset + _CHUNK])
            reader.take(parser.read_events())
        parser.close()
        reader.take(parser.read_events())
    except etree.XMLSyntaxError as exc:
        reader.take(parser.read_events())
        line, column = exc.position
        reader.out.dead_letters.append(DeadLetter(
            None, line, f"not well-formed XML at line {line}, column {column}: {exc.msg}; "
                        f"the items from there on were not read"))
    except _Stop as stop:
        reader.out.dead_letters.append(DeadLetter(None, None, str(stop)))
    return reader.out


class _Stop(Exception):
    """Reading stops (the body is not a sequence of items at all, or has too many)."""


class _Reader:
    """Turns pull-parser events into accepted items and dead letters."""

    def __init__(self, dtds: DTDLookup, limits: XmlLimits):
        self.dtds = dtds
        self.limits = limits
        self.out = ParsedItems()
        self.depth = 0
        self.item_depth = 1
        self.count = 0
        self.stream: str | None = None
        self.problem: str | None = None
        self.start_line: int | None = None

    def take(self, events) -> None:
        for event, element in events:
            if event == "start":
                self._start(element)
            else:
                self._end(element)

    def _start(self, element: etree._Element) -> None:
        self.depth += 1
        if self.depth == 1:
            if element.tag == INTERLEAVED:
                self.item_depth = 2
            elif isinstance(self.dtds, StreamDTD) and element.tag != self.dtds.root:
                raise _Stop(f"the body's root element is <{element.tag}>; the stream's items come in "
                            f"<{self.dtds.root}> (or <{INTERLEAVED}> for several streams)")
            return
        if self.item_depth == 2 and self.depth == 2:
            if element.tag != "item" or not element.get("stream"):
                raise _Stop(f'<{INTERLEAVED}> holds <item stream="ID"> elements, not <{element.tag}>')
            self.stream = element.get("stream")
            return
        if self.depth == self.item_depth + 1:
            self.problem = None
            self.start_line = element.sourceline
            if self.count >= self.limits.max_items:
                raise _Stop(f"more than {self.limits.max_items} items in one body; the rest was not read")
        if self.problem is None and self.depth - self.item_depth > self.limits.max_depth:
            self.problem = f"nested deeper than {self.limits.max_depth} levels"
        if self.problem is None:
            for name, value in element.attrib.items():
                if len(value) > self.limits.max_text:
                    self.problem = f"attribute {name!r} is longer than {self.limits.max_text} characters"
                elif _MARK in value:
                    self.problem = f"entity reference in attribute {name!r}: entities are never expanded"

    def _end(self, element: etree._Element) -> None:
        self.depth -= 1
        if self.depth != self.item_depth:
            if self.item_depth == 2 and self.depth == 1:  # an <item stream="..."> wrapper ended
                element.getparent().remove(element)
            return
        index = self.count
        self.count += 1
        parent = element.getparent()
        if parent is not None:
            parent.remove(element)
        reason = self.problem or self._check(element)
        if reason is not None:
            self.out.dead_letters.append(DeadLetter(index, self.start_line, reason))
            return
        stream = self.stream if self.item_depth == 2 else None
        self.out.items.append(ParsedItem(index, stream, element))

    def _check(self, element: etree._Element) -> str | None:
        for node in element.iter():
            if isinstance(node, etree._Entity):
                return f"entity reference {node.text}: entities are never expanded"
            if not isinstance(node.tag, str):
                continue
            for text in (node.text, node.tail if node is not element else None):
                if text and len(text) > self.limits.max_text:
                    return f"text in <{node.tag}> is longer than {self.limits.max_text} characters"
        stream = self.stream if self.item_depth == 2 else None
        dtd = _dtd_for(self.dtds, stream)
        if dtd is None:
            return f"unknown stream {stream!r}"
        return dtd.validate(element)
