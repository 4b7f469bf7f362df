"""The pgoutput decoder on messages built as the protocol documents them, and on what it must refuse."""

from __future__ import annotations

import doctest
import struct

import pytest

import streaming.capture.pgoutput as pgoutput
from streaming.capture.pgoutput import (UNCHANGED, Begin, Commit, DecodeError, Delete, Ignored, Insert, Relation,
                                        Truncate, Update, decode, format_lsn, parse_lsn)


def tuple_data(*values) -> bytes:
    out = struct.pack("!h", len(values))
    for value in values:
        if value is None:
            out += b"n"
        elif value is UNCHANGED:
            out += b"u"
        else:
            raw = value.encode()
            out += b"t" + struct.pack("!i", len(raw)) + raw
    return out


def test_the_module_examples_hold():
    assert doctest.testmod(pgoutput).failed == 0


def test_relation_and_changes():
    relation = (b"R" + struct.pack("!I", 16385) + b"public\0orders\0" + b"d" + struct.pack("!h", 2)
                + b"\x01oid\0" + struct.pack("!Ii", 23, -1) + b"\x00note\0" + struct.pack("!Ii", 25, -1))
    assert decode(relation) == Relation(16385, "public", "orders", "d", (
        pgoutput.Column("oid", 23, True), pgoutput.Column("note", 25, False)))
    assert decode(b"I" + struct.pack("!I", 16385) + b"N" + tuple_data("7", "été ✓")) == Insert(16385, ("7", "été ✓"))
    assert decode(b"U" + struct.pack("!I", 9) + b"N" + tuple_data("1", UNCHANGED)) == Update(9, ("1", UNCHANGED), None)
    assert decode(b"U" + struct.pack("!I", 9) + b"K" + tuple_data("1", None) + b"N" + tuple_data("2", "x")) == \
        Update(9, ("2", "x"), ("1", None), old_is_key=True)
    assert decode(b"D" + struct.pack("!I", 9) + b"O" + tuple_data("1", "x")) == Delete(9, ("1", "x"), False)
    assert decode(b"T" + struct.pack("!IB", 2, 3) + struct.pack("!II", 9, 10)) == Truncate((9, 10), True, True)
    assert decode(b"Y" + struct.pack("!I", 1) + b"public\0t\0") == Ignored("Y")


def test_begin_and_commit_times_are_unix_seconds():
    micros = 766_407_283_776_064  # 2024-04-14T10:54:43.776064Z since 2000-01-01
    assert decode(b"B" + struct.pack("!QqI", 100, micros, 7)) == Begin(100, 946_684_800 + micros / 1e6, 7)
    assert decode(b"C" + struct.pack("!BQQq", 0, 100, 150, micros)) == Commit(100, 150, 946_684_800 + micros / 1e6)


@pytest.mark.parametrize("payload, message", [
    (b"", "empty message"),
    (b"Z", "unknown message kind 'Z'"),
    (b"I" + struct.pack("!I", 1) + b"N" + struct.pack("!h", 1) + b"t" + struct.pack("!i", 9) + b"ab", "cut short"),
    (b"I" + struct.pack("!I", 1) + b"X", "expected the new tuple"),
    (b"I" + struct.pack("!I", 1) + b"N" + struct.pack("!h", 1) + b"q", "unknown column kind 'q'"),
    (b"D" + struct.pack("!I", 1) + b"N", "expected the old key or row"),
    (b"R" + struct.pack("!I", 1) + b"public", "unterminated string"),
    (b"B" + b"\0" * 5, "cut short"),
])
def test_what_is_not_a_message_is_refused(payload, message):
    with pytest.raises(DecodeError, match=message):
        decode(payload)


def test_lsn_text():
    assert format_lsn(parse_lsn("16/B374D848")) == "16/B374D848"
    assert parse_lsn("0/1") == 1
    with pytest.raises(ValueError):
        parse_lsn("nope")
