"""Which sharing class a saved query rides on, from its stream's latest sharing report."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import redis

from streaming import bus

from .models import KeywordQuery

__all__ = ["SharingClass", "sharing_class_of"]


@dataclass(frozen=True)
class SharingClass:
    """A query's class: its number, merged properties and the other member queries."""

    index: int
    properties: dict[str, Any]
    members: list[int]
    query: int

    @property
    def others(self) -> list[int]:
        return [m for m in self.members if m != self.query]

    def describe(self) -> str:
        others = self.others
        names = dict(KeywordQuery.objects.filter(pk__in=others).values_list("pk", "name"))
        shared = ", ".join(f"{names.get(m, m)!s} (#{m})" for m in others) if others else "no other query"
        props = self.properties
        window = props.get("window_seconds")
        return (f"class {self.index}: keywords {{{', '.join(props.get('keywords', []))}}}, Tmax {props.get('tmax')}, "
                f"window {'none' if window is None else f'{window:g} s'}; shared with {shared}")


def sharing_class_of(client: redis.Redis, query: KeywordQuery) -> SharingClass | None:
    """The query's class in the latest report of its stream's evaluator (None: not reported yet)."""
    if query.stream_id is None:
        return None
    try:
        report = bus.read_sharing_report(client, query.stream_id)
    except redis.RedisError:
        return None
    if report is None:
        return None
    for cls in report.classes:
        if query.pk in cls.get("members", []):
            return SharingClass(cls["class"], cls.get("properties", {}), list(cls["members"]), query.pk)
    return None
