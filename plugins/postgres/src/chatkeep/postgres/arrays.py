"""The append functions' array parameters, dumped in PostgreSQL's binary array format in one
step.

psycopg adapts a ``list`` parameter element by element through its generic array dumper
(type lookups, a dumper per element, a scan for nested lists): for an append of two records
that was a third of the client's CPU time. The record ids and data of a batch are always a
flat, NULL-free list of ``str`` and of ``bytes``, so the store wraps them in
:class:`TextArray` and :class:`ByteaArray`, whose dumpers (registered on every connection of
the store's pools, :func:`register`) write the wire format directly: what the server
receives is byte for byte what psycopg's own binary array dumper sends.
"""

from __future__ import annotations

import struct
from typing import Any

from psycopg.adapt import Dumper
from psycopg.pq import Format

__all__ = ["ByteaArray", "TextArray", "register"]

_TEXT_OID = 25
_BYTEA_OID = 17
_TEXT_ARRAY_OID = 1009
_BYTEA_ARRAY_OID = 1001

# array_recv's layout: dimensions, has-NULLs flag, element type, then per dimension its
# length and lower bound, then per element a length and the element's bytes.
_ONE_DIMENSION = struct.Struct("!iiiii")
_NO_DIMENSION = struct.Struct("!iii")
_LENGTH = struct.Struct("!i").pack


class TextArray:
    """A ``text[]`` parameter: a flat list of strings, none of them ``None``."""

    __slots__ = ("items",)

    def __init__(self, items: list[str]) -> None:
        self.items = items


class ByteaArray:
    """A ``bytea[]`` parameter: a flat list of ``bytes``, none of them ``None``."""

    __slots__ = ("items",)

    def __init__(self, items: list[bytes]) -> None:
        self.items = items


def pack(element_oid: int, parts: list[bytes]) -> bytes:
    """A one-dimensional array of ``parts`` (already in the element type's binary format)."""
    if not parts:
        return _NO_DIMENSION.pack(0, 0, element_oid)
    out = [_ONE_DIMENSION.pack(1, 0, element_oid, len(parts), 1)]
    for part in parts:
        out.append(_LENGTH(len(part)))
        out.append(part)
    return b"".join(out)


class _TextArrayDumper(Dumper):
    format = Format.BINARY
    oid = _TEXT_ARRAY_OID

    def __init__(self, cls: type, context: Any = None) -> None:
        super().__init__(cls, context)
        connection = self.connection
        encoding = connection.info.encoding if connection is not None else "utf-8"
        # As psycopg's own str dumpers: SQL_ASCII connections get UTF-8.
        self._encoding = "utf-8" if encoding == "ascii" else encoding

    def dump(self, obj: TextArray) -> bytes:
        # The server refuses a NUL character in text, as it does through psycopg's dumper.
        encoding = self._encoding
        return pack(_TEXT_OID, [item.encode(encoding) for item in obj.items])


class _ByteaArrayDumper(Dumper):
    format = Format.BINARY
    oid = _BYTEA_ARRAY_OID

    def dump(self, obj: ByteaArray) -> bytes:
        items = obj.items
        # A bytearray or memoryview (a caller of the backend itself) is sent as its bytes.
        if any(type(item) is not bytes for item in items):
            items = [bytes(item) for item in items]
        return pack(_BYTEA_OID, items)


def register(connection: Any) -> None:
    """Teach ``connection`` (sync or async) to send :class:`TextArray` and
    :class:`ByteaArray` parameters."""
    adapters = connection.adapters
    adapters.register_dumper(TextArray, _TextArrayDumper)
    adapters.register_dumper(ByteaArray, _ByteaArrayDumper)
