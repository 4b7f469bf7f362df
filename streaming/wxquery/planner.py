"""Grouping subscriptions for shared evaluation, in registration order (paper 002, Sect. 4 and 6).

``match``: a new subscription joins the first group whose stream answers it
unchanged (stream sharing); otherwise it starts a group of its own. ``widen``:
failing a match, the first group over the same input(s) is widened to answer
it too (stream widening); a group of windowed aggregates prefers a group it
can merge with keeping its window. ``none`` has no groups: each subscription
reads the original stream (the paper's data shipping baseline).

A group's stream is described by its abstraction; :func:`narrow` recomputes it
from the members that remain when one leaves.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Sequence

from .apt import APF, Abstraction
from .matching import DTDs, item_demand, matches, merge, narrow, relax_join_windows, shape
from .translate import Subscription

__all__ = ["Mode", "MODES", "Member", "Group", "plan_groups", "leave"]

Mode = Literal["none", "match", "widen"]
MODES: tuple[Mode, ...] = ("none", "match", "widen")


@dataclass
class Member:
    name: str
    sub: Subscription


@dataclass
class Group:
    """Subscriptions answered from one shared stream, described by ``abstraction``."""

    number: int
    abstraction: Abstraction
    members: list[Member] = field(default_factory=list)
    widened: int = 0

    @property
    def kind(self) -> str:
        return shape(self.abstraction)

    def describe(self) -> dict[str, object]:
        return {"group": self.number, "kind": self.kind, "members": [m.name for m in self.members],
                "widened": self.widened}


def _own(abstraction: Abstraction, dtds: DTDs) -> Abstraction:
    """The stream a subscription starts a group with (windows without shared aggregates read items)."""
    return item_demand(abstraction, dtds) if shape(abstraction) == "window-items" else abstraction


def plan_groups(subscriptions: Sequence[tuple[str, Subscription]], mode: Mode, dtds: DTDs) -> list[Group]:
    """Register the subscriptions one after another; ``none`` gives no group."""
    if mode not in MODES:
        raise ValueError(f"sharing mode must be one of {', '.join(MODES)}, got {mode!r}")
    groups: list[Group] = []
    if mode == "none":
        return groups
    for name, sub in subscriptions:
        query = sub.abstraction
        member = Member(name, sub)
        target = next((g for g in groups if matches(g.abstraction, query, dtds)), None)
        if target is None and mode == "widen":
            target, merged = _widen_target(groups, query, dtds)
            if target is not None:
                if isinstance(merged, APF):
                    merged = relax_join_windows(merged, [m.sub.abstraction for m in target.members] + [query])
                target.abstraction = merged
                target.widened += 1
        if target is None:
            target = Group(len(groups) + 1, _own(query, dtds))
            groups.append(target)
        target.members.append(member)
    return groups


def _widen_target(groups: list[Group], query: Abstraction, dtds: DTDs) -> tuple[Group | None, Abstraction | None]:
    candidates = []
    for g in groups:
        merged = merge(g.abstraction, query, dtds)
        if merged is not None:
            candidates.append((g, merged))
    keeps = [(g, m) for g, m in candidates if shape(m) == shape(g.abstraction)]
    chosen = keeps[0] if keeps else (candidates[0] if candidates else (None, None))
    return chosen


def leave(group: Group, name: str, dtds: DTDs) -> Group | None:
    """Remove a member and narrow the group's stream to the rest (None when no member is left)."""
    group.members = [m for m in group.members if m.name != name]
    if not group.members:
        return None
    remaining = [m.sub.abstraction for m in group.members]
    narrowed = _own(narrow(remaining, dtds), dtds)
    if isinstance(narrowed, APF):
        narrowed = relax_join_windows(narrowed, remaining)
    group.abstraction = narrowed
    return group
