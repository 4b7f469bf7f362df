"""The page of a WXQuery subscription: its text, APT and back-translation, and its result items as they arrive.

The result items come from the subscription's feed (``/ws/subscriptions/<id>/``,
docs/feeds.md), which starts with the last ones kept, so the page shows the
recent results at once and every new one after.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from redis.exceptions import RedisError

from kwmonitor.queries.apt_view import render_apt
from kwmonitor.streams.connection import redis_client
from streaming import bus

from .access import visible_subscriptions
from .views import last_metrics

__all__ = ["subscription_detail", "PAGE_REPLAY"]

PAGE_REPLAY = 200


def _evaluator_view(stream_id: int, subscription_id: int) -> dict[str, Any] | None:
    """What the stream's last batch metrics say of the stream's subscriptions (None: no batch seen)."""
    try:
        _, metrics = last_metrics(stream_id)
    except RedisError:
        return None
    if metrics is None:
        return None
    wxquery = metrics.state.get("stream", {}).get("wxquery")
    if wxquery is None:
        return {"evaluated": False, "error": None}
    error = wxquery.get("errors", {}).get(str(subscription_id))
    return {"evaluated": error is None, "error": error, "sharing": wxquery.get("subscriptions_sharing"),
            "subscriptions": wxquery.get("subscriptions"), "groups": wxquery.get("groups")}


@login_required
def subscription_detail(request: HttpRequest, pk: int) -> HttpResponse:
    subscription = get_object_or_404(visible_subscriptions(request.user), pk=pk)
    try:
        tree, back, error = render_apt(subscription.abstraction()), subscription.back_translation(), None
    except ValueError as exc:  # the stream's DTD or name changed since it was saved
        tree, back, error = None, None, str(exc)
    try:
        kept = redis_client().xlen(bus.Keys.subscription_results(subscription.pk))
    except RedisError:
        kept = None
    return render(request, "dashboard/subscription.html", {
        "subscription": subscription,
        "apt": tree,
        "back_translation": back,
        "compile_error": error,
        "kept": kept,
        "evaluator": _evaluator_view(subscription.stream_id, subscription.pk),
        "page": {"subscription": subscription.pk, "replay": PAGE_REPLAY,
                 "feed": f"/ws/subscriptions/{subscription.pk}/?replay={PAGE_REPLAY}"},
    })
