"""``POST /ingest/<stream_id>/``: NDJSON ops (or XML items) into a stream, authenticated by its ingest token.

The body is read up to ``settings.INGEST_MAX_BYTES`` (413 beyond); every line
is validated on its own, good lines are stored with their seq, bad ones are
reported as ``{"line": n, "reason": ...}``. Status 200 when at least one line
was accepted or the body holds no line, 400 when every line was rejected, 503
(with ``Retry-After``) when Redis, which assigns the seqs, or the database,
where the stream and its token are looked up, does not answer, or the
stream's landing lock stays held: then no op was stored and the client
sends the body again (docs/ops.md). With an ``Idempotency-Key`` header a body
is stored once however often it is sent: a body stored before under the key
gets its first answer again (``"replayed": true``), another body under a
used key 422. A stream whose source is a PostgreSQL publication takes its
ops from its capture alone: 409 (docs/sources.md).

An XML stream takes ``Content-Type: application/xml`` (or ``text/xml``)
bodies of items instead (:mod:`kwmonitor.ingest.xml`), with the same statuses
counted in items; each stream answers 415 to the other format.
"""

from __future__ import annotations

import re
import secrets

from django.conf import settings
from django.db import DatabaseError
from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import LockError
from redis.exceptions import TimeoutError as RedisTimeoutError

from streaming.xmlstream.items import BodyRejected

from kwmonitor.streams.models import Stream

from .service import AlreadyStored, BodyKey, Ingestor, KeyReused, closed_to_ingest
from .xml import XmlIngestor

__all__ = ["ingest"]


def _error(status: int, message: str, **headers: str) -> JsonResponse:
    response = JsonResponse({"error": message}, status=status)
    for name, value in headers.items():
        response[name] = value
    return response


XML_TYPES = ("application/xml", "text/xml")


#: An ``Idempotency-Key``: 1 to 255 visible ASCII characters (a UUID, a batch id).
IDEMPOTENCY_KEY = re.compile(r"[\x21-\x7e]{1,255}")


def _bearer(request: HttpRequest) -> str | None:
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


@csrf_exempt
@require_POST
def ingest(request: HttpRequest, stream_id: int) -> JsonResponse:
    try:
        stream = Stream.objects.select_related("schema").filter(pk=stream_id).first()
    except DatabaseError as exc:  # PostgreSQL down or restarting
        return _error(503, f"the database does not answer, nothing was stored: {exc}", **{"Retry-After": "2"})
    token = _bearer(request)
    # Same answer for an unknown stream and a wrong token: stream ids are not secrets, but
    # this endpoint should not confirm which ones exist to an unauthenticated caller.
    if stream is None or token is None or not secrets.compare_digest(token, stream.ingest_token):
        return _error(401, "missing or invalid ingest token", **{"WWW-Authenticate": 'Bearer realm="ingest"'})
    if stream.is_captured:
        return _error(409, closed_to_ingest(stream))
    limit = settings.INGEST_MAX_BYTES
    try:
        declared = int(request.headers.get("Content-Length") or 0)
    except ValueError:
        return _error(400, "invalid Content-Length")
    if declared > limit:
        return _error(413, f"body of {declared} bytes is larger than the limit of {limit} bytes")
    xml = request.content_type in XML_TYPES
    if xml != stream.is_xml:
        takes = "XML items (Content-Type: application/xml)" if stream.is_xml else "NDJSON ops (application/x-ndjson)"
        return _error(415, f"stream {stream.pk} takes {takes}, not {request.content_type}")
    idempotency_key = request.headers.get("Idempotency-Key")
    if idempotency_key is not None and not IDEMPOTENCY_KEY.fullmatch(idempotency_key):
        return _error(400, "Idempotency-Key must be 1 to 255 visible ASCII characters")
    body = request.read(limit + 1)
    if len(body) > limit:
        return _error(413, f"body is larger than the limit of {limit} bytes")
    key = BodyKey.of(idempotency_key, body) if idempotency_key is not None else None
    try:
        if xml:
            result = XmlIngestor(stream).ingest(body, key)
        else:
            result = Ingestor(stream).ingest(body.split(b"\n"), key=key)
    except AlreadyStored as stored:
        return JsonResponse(stored.answer())
    except KeyReused as exc:
        return _error(422, str(exc))
    except BodyRejected as exc:
        return _error(400, str(exc))
    except (RedisConnectionError, RedisTimeoutError) as exc:
        return _error(503, f"the stream's bus (Redis) does not answer, nothing was stored: {exc}", **{"Retry-After": "2"})
    except LockError as exc:
        return _error(503, f"another writer holds the stream, nothing was stored: {exc}", **{"Retry-After": "2"})
    status = 400 if result.errors and not result.accepted else 200
    return JsonResponse(result.to_json(), status=status)
