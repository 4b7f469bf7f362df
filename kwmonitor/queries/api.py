"""JSON API for programs: WXQuery subscriptions (list, create, read).

``GET /api/subscriptions/`` lists the subscriptions the caller may see;
``POST /api/subscriptions/`` with ``{"name", "stream", "text", "enabled"?}``
creates one owned by the caller (201), checked as the admin checks it (400
with ``{"error", "field", "line"?, "column"?}`` otherwise);
``GET /api/subscriptions/<id>/`` reads one with its APT (JSON) and
back-translation.

Authentication as the feeds: an API token (``Authorization: Token <token>``;
a given but unknown token is refused, never replaced by the session) or the
session of a logged-in user, whose unsafe requests need the CSRF token.
Subscriptions are visible to their owner and to staff; a subscription may be
created on an XML stream the caller may see (staff: any).
"""

from __future__ import annotations

import json
from typing import Any

from django.contrib.auth.models import AnonymousUser
from django.core.exceptions import ValidationError
from django.http import HttpRequest, JsonResponse
from django.middleware.csrf import CsrfViewMiddleware
from django.urls import reverse
from django.views.decorators.csrf import csrf_exempt

from streaming.wxquery.parser import WXQueryError
from streaming.xmlstream.dtd import DTDError

from kwmonitor.accounts.models import ApiToken
from kwmonitor.dashboard.access import visible_streams, visible_subscriptions

from .models import WXQuerySubscription

__all__ = ["subscriptions", "subscription", "subscription_json"]

_FIELDS = {"name", "stream", "text", "enabled"}


def _error(status: int, message: str, **extra: Any) -> JsonResponse:
    return JsonResponse({"error": message, **extra}, status=status)


def _caller(request: HttpRequest) -> tuple[Any, JsonResponse | None]:
    """The authenticated user, or the response refusing the request."""
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() == "token" and token.strip():
        user = ApiToken.user_for(token.strip())
        if user is None:
            return AnonymousUser(), _error(401, "unknown API token")
        return user, None
    user = request.user
    if not user.is_authenticated or not user.is_active:
        return user, _error(401, "log in, or send Authorization: Token <API token>")
    if request.method not in ("GET", "HEAD", "OPTIONS"):
        refused = CsrfViewMiddleware(lambda r: None).process_view(request, None, (), {})
        if refused is not None:
            return user, _error(403, "CSRF check failed (a session needs the CSRF token; programs use an API token)")
    return user, None


def subscription_json(sub: WXQuerySubscription, detail: bool = False) -> dict[str, Any]:
    """A subscription as the API shows it (with ``detail``: its APT and back-translation)."""
    out: dict[str, Any] = {
        "id": sub.pk, "name": sub.name, "stream": sub.stream_id, "owner": sub.owner.get_username(),
        "text": sub.text, "enabled": sub.enabled,
        "page": reverse("dashboard:subscription", args=[sub.pk]), "feed": f"/ws/subscriptions/{sub.pk}/",
    }
    if detail:
        try:
            out["apt"] = sub.abstraction().model_dump(mode="json")
            out["back_translation"] = sub.back_translation()
        except (WXQueryError, DTDError) as exc:
            out["apt"], out["back_translation"], out["compile_error"] = None, None, str(exc)
    return out


def _create(request: HttpRequest, user: Any) -> JsonResponse:
    try:
        body = json.loads(request.body or b"{}")
    except ValueError as exc:
        return _error(400, f"the body is not JSON: {exc}")
    if not isinstance(body, dict):
        return _error(400, "the body must be a JSON object")
    unknown = sorted(set(body) - _FIELDS)
    if unknown:
        return _error(400, f"unknown field {unknown[0]!r}", field=unknown[0])
    for name, kind in (("name", str), ("stream", int), ("text", str)):
        if not isinstance(body.get(name), kind) or isinstance(body.get(name), bool):
            return _error(400, f"{name} must be a{'n integer' if kind is int else ' string'}", field=name)
    enabled = body.get("enabled", True)
    if not isinstance(enabled, bool):
        return _error(400, "enabled must be true or false", field="enabled")
    stream = visible_streams(user).filter(pk=body["stream"]).first()
    if stream is None:
        return _error(404, f"no stream {body['stream']} you may see", field="stream")
    sub = WXQuerySubscription(owner=user, name=body["name"], stream=stream, text=body["text"], enabled=enabled)
    if stream.is_xml:
        try:
            sub.compiled()
        except WXQueryError as exc:
            place = {"line": exc.pos.line, "column": exc.pos.column} if exc.pos is not None else {}
            return _error(400, str(exc), field="text", **place)
    try:
        sub.full_clean()
    except ValidationError as exc:
        field, messages = next(iter(exc.message_dict.items()))
        return _error(400, " ".join(messages), field=field)
    sub.save()
    return JsonResponse(subscription_json(sub, detail=True), status=201)


@csrf_exempt  # token callers need none; session callers are checked in _caller
def subscriptions(request: HttpRequest) -> JsonResponse:
    user, refused = _caller(request)
    if refused is not None:
        return refused
    if request.method == "POST":
        return _create(request, user)
    if request.method != "GET":
        return _error(405, "GET or POST")
    rows = visible_subscriptions(user).order_by("id")
    return JsonResponse({"subscriptions": [subscription_json(s) for s in rows]})


@csrf_exempt
def subscription(request: HttpRequest, pk: int) -> JsonResponse:
    user, refused = _caller(request)
    if refused is not None:
        return refused
    if request.method != "GET":
        return _error(405, "GET")
    sub = visible_subscriptions(user).filter(pk=pk).first()
    if sub is None:
        return _error(404, f"no subscription {pk} you may see")
    return JsonResponse(subscription_json(sub, detail=True))
