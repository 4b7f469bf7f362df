"""Decoding the messages of PostgreSQL's ``pgoutput`` plugin (logical replication protocol version 1).

Each XLogData payload of a ``START_REPLICATION ... LOGICAL`` stream with
``proto_version '1'`` is one message (PostgreSQL's "Logical Replication
Message Formats"): ``B`` begin, ``C`` commit, ``R`` relation (sent before the
first change of a table and again after its definition changed), ``I``
insert, ``U`` update, ``D`` delete, ``T`` truncate, and ``O`` origin, ``Y``
type and ``M`` message, which a capture does not need. Column values come in
their text form (``'t'``), as ``None`` for SQL null (``'n'``) or as
:data:`UNCHANGED` for an unchanged TOASTed value of an update (``'u'``).

>>> decode(b"B" + bytes.fromhex("00000000016d2f28" "0002b8c56b0b1a40" "000002e6"))
Begin(final_lsn=23932712, commit_ts=1712792797.379136, xid=742)
>>> decode(b"I" + bytes.fromhex("00004001") + b"N" + bytes.fromhex("0002") + b"t" + bytes.fromhex("00000001")
...        + b"7" + b"n")
Insert(relation=16385, new=('7', None))
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Union

__all__ = ["UNCHANGED", "PG_EPOCH", "DecodeError", "Column", "Begin", "Commit", "Relation", "Insert", "Update",
           "Delete", "Truncate", "Ignored", "Message", "decode", "format_lsn", "parse_lsn"]

#: Seconds from the Unix epoch to PostgreSQL's (2000-01-01 00:00:00 UTC), the origin of its timestamps.
PG_EPOCH = 946_684_800


class _Unchanged:
    """An update's column whose TOASTed value did not change (pgoutput sends no value for it)."""

    def __repr__(self) -> str:
        return "UNCHANGED"


UNCHANGED = _Unchanged()
Value = Union[str, None, _Unchanged]


class DecodeError(ValueError):
    """A payload that is not a pgoutput message of protocol version 1."""


@dataclass(frozen=True, slots=True)
class Column:
    name: str
    type_oid: int
    part_of_key: bool


@dataclass(frozen=True, slots=True)
class Begin:
    final_lsn: int
    commit_ts: float  # Unix seconds
    xid: int


@dataclass(frozen=True, slots=True)
class Commit:
    commit_lsn: int
    end_lsn: int  # where the next transaction may begin: what a consumer confirms
    commit_ts: float


@dataclass(frozen=True, slots=True)
class Relation:
    relation: int  # the table's OID
    namespace: str
    name: str
    replica_identity: str  # d default, n nothing, f full, i index
    columns: tuple[Column, ...]


@dataclass(frozen=True, slots=True)
class Insert:
    relation: int
    new: tuple[Value, ...]


@dataclass(frozen=True, slots=True)
class Update:
    relation: int
    new: tuple[Value, ...]
    old: tuple[Value, ...] | None  # the old key ('K') or whole old row ('O'); None: the key did not change
    old_is_key: bool = False


@dataclass(frozen=True, slots=True)
class Delete:
    relation: int
    old: tuple[Value, ...]
    old_is_key: bool


@dataclass(frozen=True, slots=True)
class Truncate:
    relations: tuple[int, ...]
    cascade: bool
    restart_identity: bool


@dataclass(frozen=True, slots=True)
class Ignored:
    """A message a capture has no use for (origin, type, logical message)."""

    kind: str


Message = Union[Begin, Commit, Relation, Insert, Update, Delete, Truncate, Ignored]

_I8 = struct.Struct("!B")
_I16 = struct.Struct("!h")
_I32 = struct.Struct("!i")
_U32 = struct.Struct("!I")
_BEGIN = struct.Struct("!QqI")
_COMMIT = struct.Struct("!BQQq")


def _ts(micros: int) -> float:
    return PG_EPOCH + micros / 1_000_000


class _Reader:
    __slots__ = ("data", "pos")

    def __init__(self, data: bytes, pos: int = 0):
        self.data = data
        self.pos = pos

    def take(self, fmt: struct.Struct) -> tuple:
        try:
            values = fmt.unpack_from(self.data, self.pos)
        except struct.error:
            raise DecodeError(f"message cut short at byte {self.pos}") from None
        self.pos += fmt.size
        return values

    def byte(self) -> str:
        if self.pos >= len(self.data):
            raise DecodeError(f"message cut short at byte {self.pos}")
        self.pos += 1
        return chr(self.data[self.pos - 1])

    def string(self) -> str:
        end = self.data.find(b"\0", self.pos)
        if end < 0:
            raise DecodeError(f"unterminated string at byte {self.pos}")
        text = self.data[self.pos:end].decode("utf-8")
        self.pos = end + 1
        return text

    def tuple(self) -> tuple[Value, ...]:
        (count,) = self.take(_I16)
        values: list[Value] = []
        data = self.data
        for _ in range(count):
            kind = self.byte()
            if kind == "t" or kind == "b":
                (length,) = self.take(_I32)
                end = self.pos + length
                if end > len(data):
                    raise DecodeError(f"value cut short at byte {self.pos}")
                if kind == "b":
                    raise DecodeError("binary column values are not asked for (no 'binary' option)")
                values.append(data[self.pos:end].decode("utf-8"))
                self.pos = end
            elif kind == "n":
                values.append(None)
            elif kind == "u":
                values.append(UNCHANGED)
            else:
                raise DecodeError(f"unknown column kind {kind!r}")
        return tuple(values)


def _relation(r: _Reader) -> Relation:
    (oid,) = r.take(_U32)
    namespace, name = r.string(), r.string()
    identity = r.byte()
    (count,) = r.take(_I16)
    columns = []
    for _ in range(count):
        (flags,) = r.take(_I8)
        column = r.string()
        oid_of_type, _typmod = r.take(_U32) + r.take(_I32)
        columns.append(Column(column, oid_of_type, bool(flags & 1)))
    return Relation(oid, namespace, name, identity, tuple(columns))


def _update(r: _Reader) -> Update:
    (oid,) = r.take(_U32)
    kind = r.byte()
    old = None
    old_is_key = False
    if kind in ("K", "O"):
        old_is_key = kind == "K"
        old = r.tuple()
        kind = r.byte()
    if kind != "N":
        raise DecodeError(f"update: expected the new tuple, got {kind!r}")
    return Update(oid, r.tuple(), old, old_is_key)


def _delete(r: _Reader) -> Delete:
    (oid,) = r.take(_U32)
    kind = r.byte()
    if kind not in ("K", "O"):
        raise DecodeError(f"delete: expected the old key or row, got {kind!r}")
    return Delete(oid, r.tuple(), kind == "K")


def _truncate(r: _Reader) -> Truncate:
    (count,) = r.take(_U32)
    (options,) = r.take(_I8)
    relations = tuple(r.take(_U32)[0] for _ in range(count))
    return Truncate(relations, bool(options & 1), bool(options & 2))


def decode(payload: bytes) -> Message:
    """One pgoutput message (the payload of an XLogData message)."""
    if not payload:
        raise DecodeError("empty message")
    r = _Reader(payload, 1)
    kind = chr(payload[0])
    if kind == "B":
        final_lsn, micros, xid = r.take(_BEGIN)
        return Begin(final_lsn, _ts(micros), xid)
    if kind == "C":
        _flags, commit_lsn, end_lsn, micros = r.take(_COMMIT)
        return Commit(commit_lsn, end_lsn, _ts(micros))
    if kind == "R":
        return _relation(r)
    if kind == "I":
        (oid,) = r.take(_U32)
        if r.byte() != "N":
            raise DecodeError("insert: expected the new tuple")
        return Insert(oid, r.tuple())
    if kind == "U":
        return _update(r)
    if kind == "D":
        return _delete(r)
    if kind == "T":
        return _truncate(r)
    if kind in ("O", "Y", "M"):
        return Ignored(kind)
    raise DecodeError(f"unknown message kind {kind!r} (pgoutput protocol version 1)")


def format_lsn(lsn: int) -> str:
    """An LSN as PostgreSQL writes it: ``16/B374D848``."""
    return f"{lsn >> 32:X}/{lsn & 0xFFFFFFFF:X}"


def parse_lsn(text: str) -> int:
    """``16/B374D848`` -> its 64-bit position."""
    high, sep, low = text.partition("/")
    if not sep:
        raise ValueError(f"not an LSN: {text!r}")
    return (int(high, 16) << 32) | int(low, 16)
