"""An APT (or APF) as an outline for the admin and the subscription page, rendered by a template.

Each node shows its element name, the output marker (•) and its
annotations: σ (selection), ω (window with pre- and post-selection), γ
(aggregates with pre-selection, selection on the value and output marker);
an APF shows the join annotation (⋈) above its trees.
"""

from __future__ import annotations

from typing import Any

from django.template.loader import render_to_string
from django.utils.safestring import SafeString

from streaming.wxquery.apt import APF, APT, Abstraction, PathNode

__all__ = ["apt_outline", "render_apt"]


def _node(node: PathNode) -> dict[str, Any]:
    notes: list[str] = []
    if node.selection is not None:
        notes.append(f"σ: {node.selection}")
    if node.window is not None:
        w = node.window
        notes.append(f"ω: {w.label()}" + ("" if w.pre.is_true else f", pre: {w.pre}")
                     + ("" if w.post.is_true else f", post: {w.post}"))
    for agg in node.aggregates:
        text = f"γ: {agg.function}" + ("" if agg.pre.is_true else f", pre: {agg.pre}")
        text += ("" if agg.selection.is_true else f", σ: {agg.selection}") + (" •" if agg.output else "")
        notes.append(text)
    return {"name": node.name, "output": node.output, "notes": notes, "children": [_node(c) for c in node.children]}


def apt_outline(abstraction: Abstraction) -> dict[str, Any]:
    """Plain data for the template: the trees (one per input) and the join annotation of an APF."""
    trees: tuple[APT, ...] = abstraction.trees if isinstance(abstraction, APF) else (abstraction,)
    join = None
    if isinstance(abstraction, APF):
        join = str(abstraction.join.predicate) if abstraction.join is not None else "none (windows shared, each joins)"
    return {"kind": abstraction.type.upper(), "join": join,
            "trees": [{"stream": t.stream, "root": _node(t.tree)} for t in trees]}


def render_apt(abstraction: Abstraction) -> SafeString:
    """The outline as nested lists (escaped by the template; no script or inline style)."""
    return SafeString(render_to_string("queries/apt_tree.html", {"apt": apt_outline(abstraction)}))
