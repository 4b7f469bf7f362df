"""Stored op lines, the same in every source (``streaming.sources``): the op's JSON object with its
``seq`` as the first field::

    {"seq":17,"op":"insert","relation":"Order","tuple":{...},"ts":12.0}

Pure text (no Redis): executor code and the parse of a line import this;
the seqs themselves are assigned and read in Redis by ``streaming.seqs``.
"""

from __future__ import annotations

from typing import Any

import orjson

__all__ = ["SourceError", "stamp", "split_seq", "line_seq"]


class SourceError(ValueError):
    """A stored op line has no valid ``seq`` (the source was written by something else)."""


def stamp(seq: int, op_json: str) -> str:
    """The stored line: ``op_json`` (a compact JSON object) with ``seq`` put first."""
    body = op_json.strip()
    if not body.startswith("{"):
        raise ValueError("an op must be a JSON object")
    rest = body[1:].lstrip()
    return f'{{"seq":{seq}}}' if rest == "}" else f'{{"seq":{seq},{rest}'


def split_seq(line: str | bytes) -> tuple[int, dict[str, Any]]:
    """Decode a stored line into its seq and the op object without ``seq``.

    Raises :class:`SourceError` if the line is not a JSON object with an
    integer ``seq`` >= 0; a malformed op body is left to ``parse_op``.
    """
    try:
        obj = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        raise SourceError(f"stored line is not JSON: {exc}") from None
    if not isinstance(obj, dict):
        raise SourceError("stored line is not a JSON object")
    seq = obj.pop("seq", None)
    if isinstance(seq, bool) or not isinstance(seq, int) or seq < 0:
        raise SourceError(f"stored line has no valid seq: {seq!r}")
    return seq, obj


def line_seq(line: str) -> int:
    """The seq of a stored line (it is written first: no full decode)."""
    head = line[:40]
    if head.startswith('{"seq":'):
        digits = head[7:].split(",", 1)[0].split("}", 1)[0]
        if digits.isdigit():
            return int(digits)
    return split_seq(line)[0]
