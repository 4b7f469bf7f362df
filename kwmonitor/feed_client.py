"""Example program client of the live feeds: prints a query's (or a stream's) messages as NDJSON.

    python -m kwmonitor.feed_client --url ws://HOST/ws/queries/5/ --token KEY

The first line is the snapshot of the live set, then one line per change,
each with its ``"id"``. When the connection drops it reconnects with backoff,
asking for the changes after the last id it printed (``?after=``): the output
has no gap and no duplicate across reconnects. If the server answers with a new
snapshot instead (the client fell behind what Redis keeps), that snapshot is
printed and replaces everything before it. A refusal (HTTP 4xx: a bad token,
no access, no such query) ends it; a server error (HTTP 5xx: its database or
Redis away) is retried as a drop is. The token may also come from the
``KWMONITOR_TOKEN`` environment variable (kept out of the process list).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sys
from typing import Any, Callable
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus

__all__ = ["FeedRefused", "with_after", "origin_of", "last_id_of", "follow", "main"]


REFUSED_PARAMETERS = 4400  # close code of the server for a malformed request


class FeedRefused(Exception):
    """The server refused the websocket (bad token, no access, unknown object)."""


def with_after(url: str, after: str | None) -> str:
    """``url`` with its ``after`` query parameter set to ``after`` (or removed)."""
    parts = urlsplit(url)
    query = [(k, v) for k, v in parse_qsl(parts.query) if k != "after"]
    if after is not None:
        query.append(("after", after))
    return urlunsplit(parts._replace(query=urlencode(query)))


def origin_of(url: str) -> str:
    """The http(s) origin a browser on the same site would send (the server checks it)."""
    parts = urlsplit(url)
    return f"{'https' if parts.scheme == 'wss' else 'http'}://{parts.netloc}"


def last_id_of(message: dict[str, Any]) -> str | None:
    """The stream id a message brings the reader up to."""
    return message.get("last_id") if message.get("type") == "snapshot" else message.get("id")


async def follow(
    url: str,
    token: str,
    emit: Callable[[dict[str, Any]], None],
    after: str | None = None,
    limit: int | None = None,
    max_backoff: float = 30.0,
) -> None:
    """Print (``emit``) the feed's messages, reconnecting from the last id, until ``limit`` messages."""
    seen, failures = 0, 0
    while limit is None or seen < limit:
        try:
            async with connect(
                with_after(url, after),
                additional_headers={"Authorization": f"Token {token}"},
                origin=origin_of(url),  # type: ignore[arg-type]
                open_timeout=10,
            ) as ws:
                failures = 0
                async for raw in ws:
                    message = json.loads(raw)
                    emit(message)
                    after = last_id_of(message) or after
                    seen += 1
                    if limit is not None and seen >= limit:
                        return
        except InvalidStatus as exc:
            if exc.response.status_code < 500:  # no token, no access, no such query: asking again changes nothing
                raise FeedRefused(f"{url}: the server refused the feed (HTTP {exc.response.status_code})") from exc
            failures += 1  # the server failed (its database or Redis away): it may answer the next time
            await _back_off(failures, max_backoff, exc, after)
        except ConnectionClosed as exc:
            if exc.rcvd is not None and exc.rcvd.code == REFUSED_PARAMETERS:
                raise FeedRefused(f"{url}: the server refused the parameters ({exc.rcvd.reason or 'bad after'})") from exc
            failures += 1
            await _back_off(failures, max_backoff, exc, after)
        except (OSError, InvalidHandshake, TimeoutError) as exc:
            failures += 1
            await _back_off(failures, max_backoff, exc, after)


async def _back_off(failures: int, max_backoff: float, exc: BaseException, after: str | None) -> None:
    delay = min(max_backoff, 0.5 * 2 ** (failures - 1)) * random.uniform(0.8, 1.2)
    print(f"feed_client: {type(exc).__name__}: {exc}; reconnecting in {delay:.1f}s after {after}", file=sys.stderr)
    await asyncio.sleep(delay)


def _emit(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kwmonitor.feed_client", description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", required=True, help="ws://HOST/ws/queries/ID/ or ws://HOST/ws/streams/ID/")
    parser.add_argument("--token", default=os.environ.get("KWMONITOR_TOKEN"), help="API token (or KWMONITOR_TOKEN)")
    parser.add_argument("--after", help="resume after this stream id instead of starting with a snapshot")
    parser.add_argument("--limit", type=int, help="exit after printing this many messages")
    args = parser.parse_args(argv)
    if not args.token:
        parser.error("an API token is required (--token or KWMONITOR_TOKEN); issue one in the admin")
    try:
        asyncio.run(follow(args.url, args.token, _emit, after=args.after, limit=args.limit))
    except FeedRefused as exc:
        print(f"feed_client: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
