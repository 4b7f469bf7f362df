"""The DTD of an XML data stream: element structure, item element, DTD order, validation of items.

A stream's DTD describes one document: a root element whose content is a
repetition of *item* elements (``<!ELEMENT photons (photon*)>``), each item
being one stream element (paper 002, Figure 2). The stream's items arrive one
by one; each is validated on its own against the item's declaration.

The DTD is read by lxml. Entity and notation declarations are refused: a
stream DTD describes structure only, and refusing them removes every way for a
DTD to pull in external files or expand text.

>>> dtd = StreamDTD.from_text(_EXAMPLE)
>>> dtd.root, dtd.item
('photons', 'photon')
>>> dtd.children("cel")
('ra', 'dec')
>>> dtd.exactly_once(("coord", "cel", "ra"))
True
"""

from __future__ import annotations

import io
import math
import re
from dataclasses import dataclass
from typing import Iterator

from lxml import etree

__all__ = ["DTDError", "Occurrence", "StreamDTD"]

_EXAMPLE = """<!ELEMENT photons (photon*)>
<!ELEMENT photon (coord, en)>
<!ELEMENT coord (cel)>
<!ELEMENT cel (ra, dec)>
<!ELEMENT ra (#PCDATA)>
<!ELEMENT dec (#PCDATA)>
<!ELEMENT en (#PCDATA)>
"""

_FORBIDDEN = re.compile(r"<!\s*(ENTITY|NOTATION)\b|%[A-Za-z_]|\bSYSTEM\b|\bPUBLIC\b")


class DTDError(ValueError):
    """A DTD that cannot describe a stream; the message says why."""


@dataclass(frozen=True, slots=True)
class Occurrence:
    """How often a child may occur in its parent: ``low`` to ``high`` times (``high`` may be infinite)."""

    low: int
    high: float

    def __add__(self, other: "Occurrence") -> "Occurrence":
        return Occurrence(self.low + other.low, self.high + other.high)


_ONCE = Occurrence(1, 1)


def _scaled(occ: Occurrence, modifier: str) -> Occurrence:
    if modifier == "opt":
        return Occurrence(0, occ.high)
    if modifier == "mult":
        return Occurrence(0, math.inf if occ.high else 0)
    if modifier == "plus":
        return Occurrence(occ.low, math.inf if occ.high else 0)
    return occ


def _content_children(content: etree._DTDElementContentDecl | None) -> list[tuple[str, Occurrence]]:
    """Children of one content model with their occurrence, in document order (a name may repeat)."""
    if content is None or content.type == "pcdata":
        return []
    if content.type == "element":
        return [(content.name, _scaled(_ONCE, content.occur))]
    left = _content_children(content.left)
    right = _content_children(content.right)
    if content.type == "or":
        parts = [(name, Occurrence(0, occ.high)) for name, occ in left + right]
    else:
        parts = left + right
    return [(name, _scaled(occ, content.occur)) for name, occ in parts]


class StreamDTD:
    """The structure of a stream: root, item element, each element's children and their occurrence."""

    def __init__(self, text: str, dtd: etree.DTD):
        self.text = text
        self._dtd = dtd
        self._children: dict[str, tuple[str, ...]] = {}
        self._occurrence: dict[tuple[str, str], Occurrence] = {}
        self._leaf: dict[str, bool] = {}
        for decl in dtd.elements():
            merged: dict[str, Occurrence] = {}
            for name, occ in _content_children(decl.content):
                merged[name] = merged[name] + occ if name in merged else occ
            self._children[decl.name] = tuple(merged)
            for name, occ in merged.items():
                self._occurrence[(decl.name, name)] = occ
            self._leaf[decl.name] = decl.type in ("mixed", "empty") and not merged
        undeclared = sorted({c for kids in self._children.values() for c in kids} - set(self._children))
        if undeclared:
            raise DTDError(f"element {undeclared[0]!r} is used in a content model but never declared")
        referenced = {c for kids in self._children.values() for c in kids}
        roots = [name for name in self._children if name not in referenced]
        if len(roots) != 1:
            raise DTDError("a stream DTD needs exactly one root element (one not used in any content model), "
                           f"found {len(roots)}: {', '.join(roots) or 'none'}")
        self.root = roots[0]
        kids = self._children[self.root]
        if len(kids) != 1 or self._occurrence[(self.root, kids[0])].high != math.inf:
            raise DTDError(f"the root element {self.root!r} must contain a repetition of one item element, "
                           f"as in <!ELEMENT {self.root} (item*)>")
        self.item = kids[0]
        self._check_acyclic(self.item, ())

    @classmethod
    def from_text(cls, text: str) -> "StreamDTD":
        """Read a DTD; raise :class:`DTDError` naming what is wrong."""
        found = _FORBIDDEN.search(text)
        if found:
            line = text.count("\n", 0, found.start()) + 1
            raise DTDError(f"line {line}: entity, notation, parameter-entity and external declarations "
                           "are not allowed in a stream DTD")
        try:
            dtd = etree.DTD(io.StringIO(text))
        except etree.DTDParseError as exc:
            raise DTDError(f"not a DTD: {exc}") from None
        if not list(dtd.elements()):
            raise DTDError("the DTD declares no element")
        return cls(text, dtd)

    def _check_acyclic(self, name: str, seen: tuple[str, ...]) -> None:
        if name in seen:
            raise DTDError(f"element {name!r} contains itself ({' > '.join(seen + (name,))}): "
                           "stream items must have a finite structure")
        for child in self._children[name]:
            self._check_acyclic(child, seen + (name,))

    # -- structure -------------------------------------------------------------------

    def children(self, name: str) -> tuple[str, ...]:
        """Child element names of ``name`` in DTD order."""
        return self._children[name]

    def is_leaf(self, name: str) -> bool:
        """Whether ``name`` holds text only (``(#PCDATA)`` or EMPTY)."""
        return self._leaf.get(name, False)

    def declares(self, name: str) -> bool:
        return name in self._children

    def occurrence(self, parent: str, child: str) -> Occurrence | None:
        return self._occurrence.get((parent, child))

    def resolve(self, start: str, steps: tuple[str, ...]) -> str | None:
        """The element reached from ``start`` by ``steps``, or None if the DTD has no such path."""
        name = start
        for step in steps:
            if (name, step) not in self._occurrence:
                return None
            name = step
        return name

    def exactly_once(self, steps: tuple[str, ...], start: str | None = None) -> bool:
        """Whether the path ``steps`` from the item (or ``start``) selects exactly one element in every item."""
        name = start or self.item
        for step in steps:
            occ = self._occurrence.get((name, step))
            if occ is None or occ != _ONCE:
                return False
            name = step
        return True

    def order_key(self, steps: tuple[str, ...], start: str | None = None) -> tuple[int, ...]:
        """Position of each step among its siblings: sorting by it gives DTD (document) order."""
        name = start or self.root
        key = []
        for step in steps:
            kids = self._children.get(name, ())
            key.append(kids.index(step) if step in kids else len(kids))
            name = step
        return tuple(key)

    def leaf_paths(self, start: str | None = None) -> Iterator[tuple[str, ...]]:
        """Every path from ``start`` (the item) to a text-only element, in DTD order."""
        name = start or self.item
        for child in self._children[name]:
            if not self._children[child]:
                yield (child,)
            else:
                for rest in self.leaf_paths(child):
                    yield (child, *rest)

    # -- validation --------------------------------------------------------------------

    def validate(self, element: etree._Element) -> str | None:
        """None if ``element`` is a valid item, else the first validation error."""
        if element.tag != self.item:
            return f"expected an item element <{self.item}>, got <{element.tag}>"
        if self._dtd.validate(element):
            return None
        errors = self._dtd.error_log.filter_from_errors()
        return errors[0].message if errors else "not valid against the stream's DTD"
