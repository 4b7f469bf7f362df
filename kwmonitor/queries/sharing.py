"""Which sharing class a saved query rides on, from its stream's evaluators' sharing reports of their current plans."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import redis

from streaming import bus

from kwmonitor.streams.models import Evaluator

from .models import KeywordQuery

__all__ = ["SharingClass", "sharing_note"]


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


def sharing_note(client: redis.Redis, query: KeywordQuery) -> tuple[SharingClass | None, str]:
    """The query's class in its stream's evaluators' reports of their current plans, or why there is none.

    A report written before its evaluator adopted the plan it has now (the
    plan an edit, a disable or any other change of the stream produced) no
    longer says where the query is: until a fresh one comes, the answer is
    that the evaluator has not adopted the plan yet. A disabled query has no
    class whatever a report says.
    """
    if not query.enabled:
        return None, "Disabled: in no sharing class; its results are kept as they were when it was disabled."
    if query.stream_id is None:
        return None, "On no stream: in no sharing class."
    try:
        reports = bus.read_sharing_reports(client, query.stream_id)
    except redis.RedisError:
        return None, "The bus (Redis) does not answer: the sharing class is not known now."
    versions = dict(Evaluator.objects.filter(stream_id=query.stream_id).values_list("pk", "plan_version"))
    stale = 0
    for report in reports:
        current = versions.get(report.evaluator or 0, 0)
        if report.plan_version < current:
            stale = max(stale, current)
            continue
        for cls in report.classes:
            if query.pk in cls.get("members", []):
                return SharingClass(cls["class"], cls.get("properties", {}), list(cls["members"]), query.pk), ""
    if stale:
        return None, (f"The evaluator has not adopted the stream's plan version {stale} yet: "
                      "the class is reported as soon as it has.")
    if reports:
        return None, "In no sharing class: the evaluator does not evaluate it (its state says why)."
    return None, "Not evaluated yet: the evaluator reports the sharing classes every 10 s while it runs."
