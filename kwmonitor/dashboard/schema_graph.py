"""A layered drawing of a schema graph: relations as boxes, foreign keys as arrows.

Referenced relations sit above the relations that hold references to them
(longest-path layering over the FK graph, cycles broken at DFS back edges);
within a layer relations are ordered by the barycentre of their neighbours in
the layers above and below (a few sweeps), which keeps crossings low on the
schemas we draw. The result is plain geometry for the SVG template.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from streaming.schema import Schema

__all__ = ["Box", "Row", "Arrow", "Drawing", "draw_schema"]

CHAR_W = 7.4  # width of one character of the 12px monospace used in the boxes
ROW_H = 18
HEAD_H = 26
PAD = 10
GAP_X = 48
GAP_Y = 84
MARGIN = 24
DISPLAY_SCALE = 1.5


@dataclass(frozen=True)
class Row:
    name: str
    type: str
    role: str  # "key", "fk", "text" (searchable) or "" (other)
    y: float  # baseline of the row's text, absolute


@dataclass
class Box:
    name: str
    layer: int
    x: float = 0.0
    y: float = 0.0
    width: float = 0.0
    height: float = 0.0
    rows: list[Row] = field(default_factory=list)

    @property
    def cx(self) -> float:
        return self.x + self.width / 2

    @property
    def title_y(self) -> float:
        return self.y + 17

    @property
    def text_x(self) -> float:
        return self.x + PAD


@dataclass(frozen=True)
class Arrow:
    """A foreign key ``holder.column -> target``: an SVG path ``d`` and its label position."""

    holder: str
    target: str
    name: str
    d: str
    label_x: float
    label_y: float


@dataclass(frozen=True)
class Drawing:
    width: float
    height: float
    boxes: list[Box]
    arrows: list[Arrow]

    @property
    def display_width(self) -> float:
        """Shown larger than drawn: a schema graph has few boxes and small text."""
        return self.width * DISPLAY_SCALE

    @property
    def display_height(self) -> float:
        return self.height * DISPLAY_SCALE


def _layers(schema: Schema) -> dict[str, int]:
    """Layer of each relation: 0 for relations that reference no other, else 1 + the deepest target."""
    targets = {
        name: [fk.target for fk in rel.foreign_keys if fk.target != name] for name, rel in schema.relations.items()
    }
    layer: dict[str, int] = {}
    on_path: set[str] = set()

    def visit(name: str) -> int:
        if name in layer:
            return layer[name]
        on_path.add(name)
        depth = 0
        for target in targets[name]:
            if target not in on_path:  # a back edge closes a cycle: ignored for layering
                depth = max(depth, visit(target) + 1)
        on_path.discard(name)
        layer[name] = depth
        return depth

    for name in schema.relations:
        visit(name)
    return layer


def _order(schema: Schema, layer: dict[str, int]) -> list[list[str]]:
    """Relations per layer, ordered by barycentre sweeps (down then up, twice)."""
    count = max(layer.values(), default=-1) + 1
    rows: list[list[str]] = [[n for n in schema.relations if layer[n] == i] for i in range(count)]
    neighbours: dict[str, set[str]] = {n: set() for n in schema.relations}
    for name, rel in schema.relations.items():
        for fk in rel.foreign_keys:
            if fk.target != name:
                neighbours[name].add(fk.target)
                neighbours[fk.target].add(name)

    def sweep(indices: range, ref: int) -> None:
        for i in indices:
            position = {n: p for p, n in enumerate(rows[i + ref])}
            def centre(n: str) -> float:
                around = [position[m] for m in neighbours[n] if m in position]
                return sum(around) / len(around) if around else rows[i].index(n)
            rows[i].sort(key=centre)

    for _ in range(2):
        sweep(range(1, count), -1)
        sweep(range(count - 2, -1, -1), 1)
    return rows


def _role(rel_key: str, fk_columns: set[str], searchable: tuple[str, ...], attr: str) -> str:
    if attr == rel_key:
        return "key"
    if attr in fk_columns:
        return "fk"
    return "text" if attr in searchable else ""


def draw_schema(schema: Schema) -> Drawing:
    """Place every relation and route every foreign key of ``schema``."""
    layer = _layers(schema)
    rows = _order(schema, layer)
    boxes: dict[str, Box] = {}
    for name, rel in schema.relations.items():
        longest = max([len(name) + 2, *(len(a) + len(t) + 4 for a, t in rel.attributes.items())])
        boxes[name] = Box(
            name=name,
            layer=layer[name],
            width=round(longest * CHAR_W + 2 * PAD),
            height=HEAD_H + ROW_H * len(rel.attributes) + PAD / 2,
        )
    widths = [sum(boxes[n].width for n in row) + GAP_X * (len(row) - 1) for row in rows]
    total_w = max(widths, default=0) + 2 * MARGIN + 60  # room for self-reference loops
    y = MARGIN
    for row, row_w in zip(rows, widths):
        x = (total_w - row_w) / 2
        for name in row:
            box = boxes[name]
            box.x, box.y = x, y
            x += box.width + GAP_X
        y += max(boxes[n].height for n in row) + GAP_Y
    total_h = y - GAP_Y + MARGIN

    for name, rel in schema.relations.items():
        box = boxes[name]
        fk_columns = {fk.column for fk in rel.foreign_keys}
        box.rows = [
            Row(attr, typ, _role(rel.key, fk_columns, rel.searchable, attr), box.y + HEAD_H + ROW_H * (i + 1) - 5)
            for i, (attr, typ) in enumerate(rel.attributes.items())
        ]

    # Each arrow leaves its holder and enters its target at its own x, in the
    # left-to-right order of the other end, so parallel references stay apart.
    refs = [(name, fk) for name, rel in schema.relations.items() for fk in rel.foreign_keys]
    out_rank: dict[tuple[str, str], tuple[int, int]] = {}
    in_rank: dict[tuple[str, str], tuple[int, int]] = {}
    for name in schema.relations:
        outgoing = sorted((fk for h, fk in refs if h == name), key=lambda fk: (boxes[fk.target].cx, fk.name))
        incoming = sorted(((h, fk) for h, fk in refs if fk.target == name), key=lambda r: (boxes[r[0]].cx, r[1].name))
        for i, fk in enumerate(outgoing):
            out_rank[(name, fk.name)] = (i, len(outgoing))
        for i, (h, fk) in enumerate(incoming):
            in_rank[(h, fk.name)] = (i, len(incoming))
    arrows = [_route(boxes[h], boxes[fk.target], fk.name, out_rank[(h, fk.name)], in_rank[(h, fk.name)]) for h, fk in refs]
    return Drawing(width=total_w, height=total_h, boxes=list(boxes.values()), arrows=arrows)


def _offset(rank: tuple[int, int], width: float) -> float:
    index, count = rank
    step = min(28.0, (width - 2 * PAD) / max(count, 1))
    return (index - (count - 1) / 2) * step


def _bezier(p0: float, p1: float, p2: float, p3: float, t: float) -> float:
    u = 1 - t
    return u * u * u * p0 + 3 * u * u * t * p1 + 3 * u * t * t * p2 + t * t * t * p3


def _route(holder: Box, target: Box, name: str, out_rank: tuple[int, int], in_rank: tuple[int, int]) -> Arrow:
    if holder is target:  # self-reference: a loop on the right side
        x0, y0 = holder.x + holder.width, holder.y + HEAD_H + 6 + out_rank[0] * 10
        x1, y1 = x0, y0 + 22
        d = f"M{x0:.1f},{y0:.1f} C{x0 + 46:.1f},{y0 - 10:.1f} {x1 + 46:.1f},{y1 + 10:.1f} {x1 + 2:.1f},{y1:.1f}"
        return Arrow(holder.name, target.name, name, d, x0 + 40, (y0 + y1) / 2 + 4)
    x0 = holder.cx + _offset(out_rank, holder.width)
    x1 = target.cx + _offset(in_rank, target.width)
    if target.layer < holder.layer:  # the usual case: up to the referenced relation
        y0, y1 = holder.y, target.y + target.height + 2
        c0 = c1 = (y0 + y1) / 2
    elif target.layer > holder.layer:  # a cycle's back edge: down
        y0, y1 = holder.y + holder.height, target.y - 2
        c0 = c1 = (y0 + y1) / 2
    else:  # same layer: an arc over the top
        y0, y1 = holder.y, target.y - 2
        c0 = c1 = max(4.0, min(holder.y, target.y) - 40)
    d = f"M{x0:.1f},{y0:.1f} C{x0:.1f},{c0:.1f} {x1:.1f},{c1:.1f} {x1:.1f},{y1:.1f}"
    t = 0.3  # label near the holder, where arrows are furthest apart
    return Arrow(holder.name, target.name, name, d, _bezier(x0, x0, x1, x1, t) + 4, _bezier(y0, c0, c1, y1, t) + 4)
