"""The unit a backend stores: an opaque record, and the checks the core applies before a
backend sees a session id or a batch."""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from .errors import InvalidRecord, InvalidSessionId

__all__ = [
    "MAX_RECORD_ID_LENGTH",
    "MAX_SESSION_ID_LENGTH",
    "Record",
    "check_records",
    "check_session_id",
    "prefix_upper_bound",
]

#: Session ids are at most this many characters (code points).
MAX_SESSION_ID_LENGTH = 512
#: Record ids are at most this many characters (code points), without NUL.
MAX_RECORD_ID_LENGTH = 256


class Record(NamedTuple):
    """One entry of a session's append-only log.

    ``id`` is unique within the session (the core uses the message id); ``data`` is opaque to
    the backend, which stores and returns it byte for byte.
    """

    id: str
    data: bytes


def check_session_id(session_id: object) -> str:
    """Return ``session_id`` if it is a valid session id, else raise :class:`InvalidSessionId`.

    Valid: a non-empty ``str`` of at most 512 characters, without NUL, encodable as UTF-8
    (so no lone surrogates). Everything else, including hostile-looking but valid ids such as
    ``"../x"`` or ``"a;DROP TABLE"``, is a backend's job to keep apart safely.
    """
    if type(session_id) is not str:
        if isinstance(session_id, str):  # a str subclass: normalise to a plain str
            session_id = str.__str__(session_id)
        else:
            raise InvalidSessionId(session_id, f"must be a str, not {type(session_id).__name__}")
    assert isinstance(session_id, str)
    if not session_id:
        raise InvalidSessionId(session_id, "must not be empty")
    if len(session_id) > MAX_SESSION_ID_LENGTH:
        raise InvalidSessionId(
            session_id, f"is {len(session_id)} characters long; the limit is 512"
        )
    if "\x00" in session_id:
        raise InvalidSessionId(session_id, "must not contain NUL")
    if not session_id.isascii():
        try:
            session_id.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidSessionId(
                session_id, "must be encodable as UTF-8 (it contains a lone surrogate)"
            ) from None
    return session_id


def check_records(records: Iterable[Record | tuple[str, bytes]]) -> list[Record]:
    """Validate a batch for ``append`` and return it as a list of :class:`Record`.

    Raises :class:`InvalidRecord` for an id that is not a non-empty str, data that is not
    bytes-like, or an id repeated within the batch.
    """
    batch: list[Record] = []
    seen: set[str] = set()
    for position, item in enumerate(records):
        try:
            record_id, data = item
        except (TypeError, ValueError):
            raise InvalidRecord(
                f"record {position} of the batch is not an (id, data) pair: {type(item).__name__}"
            ) from None
        if type(record_id) is not str or not record_id:
            raise InvalidRecord(f"record {position} of the batch has an invalid id {record_id!r}")
        if len(record_id) > MAX_RECORD_ID_LENGTH or "\x00" in record_id:
            raise InvalidRecord(
                f"record {position}: ids are at most {MAX_RECORD_ID_LENGTH} characters "
                "and contain no NUL"
            )
        if type(data) is not bytes:
            if isinstance(data, (bytearray, memoryview)):
                data = bytes(data)
            else:
                raise InvalidRecord(
                    f"record {position} ({record_id!r}): data must be bytes, "
                    f"not {type(data).__name__}"
                )
        if record_id in seen:
            raise InvalidRecord(f"record id {record_id!r} appears twice in one batch")
        seen.add(record_id)
        batch.append(
            item if type(item) is Record and item.data is data else Record(record_id, data)
        )
    return batch


def prefix_upper_bound(prefix: str) -> str | None:
    """The smallest string greater than every string that starts with ``prefix``, in
    code-point order (the byte order of UTF-8, SQLite's TEXT order, PostgreSQL's
    ``COLLATE "C"``), or ``None`` when there is none (``prefix`` is all U+10FFFF).

    ``prefix <= id < prefix_upper_bound(prefix)`` selects exactly the ids starting with
    ``prefix`` through an index, with ``%``, ``_`` and every other character literal::

        prefix_upper_bound("ab")  # 'ac'
    """
    characters = list(prefix)
    while characters:
        code = ord(characters.pop()) + 1
        if code == 0xD800:  # surrogates never occur in valid ids: skip them
            code = 0xE000
        if code <= 0x10FFFF:
            return "".join(characters) + chr(code)
    return None
