"""What the log algorithm knows and remembers about a session.

* :class:`Log`: where a session lives and the handle's memory of it (:class:`Seen`).
* :class:`Cursor`: the handle's last view of the session's end. Only a hint: every write is
  conditional on the service, so a stale cursor costs a re-read, never a wrong write.
* :class:`Seen`: record ids known to be stored, so re-sent records are skipped.
* :class:`IdIndex`: every record id of the session up to a point of its log (fingerprints),
  so a batch re-sent by another process long after it landed is still recognised.
* Segment metadata: every segment carries the session id, the *incarnation* (a random id of
  this life of the session, new after a delete) and where the previous segment ends.
"""

from __future__ import annotations

import base64
import hashlib
import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from chatkeep.core import Record, RecordConflict

from . import frames as fmt
from .frames import Frame
from .layout import pointer_name, segment_name

__all__ = [
    "ABSENT",
    "META_BASE",
    "META_INCARNATION",
    "META_LAST",
    "META_PREVIOUS",
    "META_SESSION",
    "Contended",
    "Cursor",
    "IdIndex",
    "Limits",
    "Log",
    "Restart",
    "Seen",
    "SessionCache",
    "Unsettled",
    "meta",
    "meta_int",
    "session_id_from_metadata",
]

META_SESSION = "chatkeep_session"
META_INCARNATION = "chatkeep_incarnation"
META_PREVIOUS = "chatkeep_previous_length"
META_BASE = "chatkeep_base_records"
META_LAST = "chatkeep_last_segment"

DEFAULT_RECORD_BYTES = 512


@dataclass(frozen=True)
class Limits:
    """Sizes and thresholds (overridable through store options, mainly for tests)."""

    #: Largest Append Block body: 4 MiB is the limit on every service version.
    max_block: int = 4 * 1024 * 1024
    #: Roll to a new segment before this many committed blocks (the service allows 50,000).
    segment_blocks: int = 49_000
    #: ... or before a segment grows past this many bytes.
    segment_bytes: int = 64 * 1024**3
    #: Smallest window a read or re-read fetches.
    probe: int = 8 * 1024
    #: Largest single download.
    max_get: int = 32 * 1024 * 1024
    #: How long an append may keep losing races before it gives up.
    contention_timeout: float = 120.0
    #: Record ids remembered per session for skipping re-sent records.
    seen_ids: int = 2048
    #: Check re-sent ids against the whole session (``"session"``: an :class:`IdIndex`
    #: per session, built once per handle) or only the recent frames (``"recent"``).
    resend_check: str = "session"


class Contended(Exception):
    """An append kept losing races for longer than the contention timeout."""


class Restart(Exception):
    """The session changed shape under an operation (deleted or recreated): start over."""


@dataclass(frozen=True)
class Cursor:
    """A handle's last view of the end of a session."""

    incarnation: str  #: random id of this life of the session
    segment: int  #: the last segment (-1: the session did not exist, see :data:`ABSENT`)
    length: int  #: its length in bytes (a frame boundary)
    total: int  #: records in the session up to ``length``
    blocks: int  #: committed blocks in the segment
    etag: str | None  #: the segment's version at ``length``
    previous: int | None  #: where the previous segment ends, from this one's metadata
    record_bytes: int = DEFAULT_RECORD_BYTES  #: observed bytes per record, for estimates

    @property
    def absent(self) -> bool:
        """Whether this only says the session did not exist when last looked at."""
        return self.segment < 0


#: The cursor of a session a read found missing: its first append tries creating it first.
ABSENT = Cursor("", -1, 0, 0, 0, None, None)


class Unsettled(Exception):
    """An append's outcome is unknown (the service error is chained as the cause).

    ``cursor`` is the handle's best knowledge; ``attempt`` is ``(segment, position, size)``
    of the write that may have landed, for the next append to check before writing.
    """

    def __init__(self, cursor: Cursor | None, attempt: tuple[int, int, int] | None) -> None:
        self.cursor = cursor
        self.attempt = attempt
        super().__init__("the append's outcome is unknown")


class Seen:
    """Record ids (and oversized-batch digests) known to be in one life of a session.

    Thread-safe and bounded: the oldest ids are forgotten first.
    """

    def __init__(self, capacity: int) -> None:
        self._capacity = capacity
        self._lock = threading.Lock()
        self.incarnation: str | None = None
        self._ids: dict[str, bytes] = {}  # record id -> digest of its data
        self._digests: dict[bytes, None] = {}

    def learn(
        self,
        incarnation: str,
        ids: Iterable[tuple[str, bytes]] = (),
        digest: bytes | None = None,
    ) -> None:
        """Remember ``ids`` (record id, data digest pairs) and the oversized batch ``digest``
        as stored in life ``incarnation``."""
        with self._lock:
            if incarnation != self.incarnation:
                self.incarnation = incarnation
                self._ids.clear()
                self._digests.clear()
            known = self._ids
            for record_id, data in ids:
                known.pop(record_id, None)
                known[record_id] = data
            while len(known) > self._capacity:
                del known[next(iter(known))]
            if digest is not None:
                self._digests[digest] = None
                while len(self._digests) > 64:
                    del self._digests[next(iter(self._digests))]

    def learn_frames(self, incarnation: str, found: Iterable[Frame]) -> None:
        """Remember the ids in RECORDS frames and the digests in POINTER frames."""
        for frame in found:
            if frame.kind == fmt.KIND_RECORDS:
                found_ids = fmt.decode_id_digests(frame.body, frame.records, frame.start)
                self.learn(incarnation, found_ids)
            elif frame.kind == fmt.KIND_POINTER:
                pointer = fmt.decode_pointer(frame.body, frame.start)
                self.learn(incarnation, digest=pointer.digest)

    def unseen(self, incarnation: str, records: list[Record], session_id: str) -> list[Record]:
        """The records not known to be stored in life ``incarnation``.

        Raises :class:`~chatkeep.core.RecordConflict` for a record whose id is known with
        other data (an exact retry is skipped; a reused id would lose one of the two).
        """
        with self._lock:
            if incarnation != self.incarnation:
                return records
            if self._digests and fmt.ids_digest(records) in self._digests:
                return []
            known = self._ids
            fresh = []
            for record in records:
                stored = known.get(record.id)
                if stored is None:
                    fresh.append(record)
                elif stored != fmt.data_digest(record.data):
                    raise RecordConflict(session_id, record.id)
            return fresh


def _fingerprint(data: bytes) -> int:
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "little")


class IdIndex:
    """Every record id of one life of a session from its start up to ``(segment, offset)``
    of its log, as 64-bit fingerprints of the id with a 64-bit fingerprint of the record's
    data (about 100 bytes of memory per record), plus the digests of oversized batches.

    Complete by construction: it only ever grows by the frames at exactly its end, read
    from the service or just appended by this handle. Thread-safe.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.incarnation: str | None = None
        self.segment = 0
        self.offset = 0
        self.broken = False  #: a damaged frame stopped it: it cannot become complete
        self._ids: dict[int, int] = {}
        self._batches: set[bytes] = set()

    def at(self, incarnation: str, segment: int, offset: int) -> bool:
        """Whether the index covers exactly the log before ``(segment, offset)``."""
        with self._lock:
            return (self.incarnation, self.segment, self.offset) == (incarnation, segment, offset)

    def position(self, incarnation: str) -> tuple[int, int]:
        """Where the index ends in life ``incarnation`` (starting it over if it described
        another life of the session)."""
        with self._lock:
            if self.incarnation != incarnation:
                self.incarnation, self.segment, self.offset = incarnation, 0, 0
                self.broken = False
                self._ids.clear()
                self._batches.clear()
            return self.segment, self.offset

    def advance(
        self, incarnation: str, segment: int, start: int, found: Iterable[Frame], end: int
    ) -> bool:
        """Add ``found`` (the frames of ``segment`` from ``start`` to ``end``) if the index
        ends at ``start``; a ROLL frame moves it to the next segment. Returns whether it
        did."""
        with self._lock:
            if (self.incarnation, self.segment, self.offset) != (incarnation, segment, start):
                return False
            ids, batches = self._ids, self._batches
            for frame in found:
                if frame.kind == fmt.KIND_RECORDS:
                    for record_id, digest in fmt.decode_id_digests(
                        frame.body, frame.records, frame.start
                    ):
                        ids[_fingerprint(record_id.encode("utf-8"))] = int.from_bytes(
                            digest[:8], "little"
                        )
                elif frame.kind == fmt.KIND_POINTER:
                    batches.add(fmt.decode_pointer(frame.body, frame.start).digest)
                elif frame.kind == fmt.KIND_ROLL:
                    self.segment, self.offset = fmt.decode_roll(frame.body, frame.start), 0
                    return True
            self.offset = end
            return True

    def added(
        self,
        incarnation: str,
        where: tuple[int, int, int],
        ids: Iterable[tuple[str, bytes]],
        batch: bytes | None,
    ) -> None:
        """Record the frame this handle just appended: ``where`` is ``(segment, start,
        end)``, ``ids`` its (record id, data digest) pairs, ``batch`` the digest of an
        oversized batch. Ignored unless the index ends at ``start``."""
        segment, start, end = where
        with self._lock:
            if (self.incarnation, self.segment, self.offset) != (incarnation, segment, start):
                return
            if batch is not None:
                self._batches.add(batch)
            known = self._ids
            for record_id, digest in ids:
                known[_fingerprint(record_id.encode("utf-8"))] = int.from_bytes(
                    digest[:8], "little"
                )
            self.offset = end

    def rolled(self, incarnation: str, segment: int, start: int) -> None:
        """Record the ROLL frame this handle appended at ``start`` of ``segment``."""
        with self._lock:
            if (self.incarnation, self.segment, self.offset) == (incarnation, segment, start):
                self.segment, self.offset = segment + 1, 0

    def unseen(self, records: list[Record], session_id: str) -> list[Record]:
        """The records whose ids the index does not hold; raises
        :class:`~chatkeep.core.RecordConflict` for an id held with other data."""
        with self._lock:
            if self._batches and fmt.ids_digest(records) in self._batches:
                return []
            ids = self._ids
            fresh = []
            for record in records:
                stored = ids.get(_fingerprint(record.id.encode("utf-8")))
                if stored is None:
                    fresh.append(record)
                elif stored != int.from_bytes(fmt.data_digest(record.data)[:8], "little"):
                    raise RecordConflict(session_id, record.id)
            return fresh


@dataclass(frozen=True)
class Log:
    """One session's log as the algorithm sees it: names, memory and limits."""

    session_id: str
    folder_path: str  #: ``{root}{folder}``, see :mod:`.names`
    seen: Seen
    limits: Limits
    create_container: bool = True
    index: IdIndex | None = None  #: ``None`` with ``resend_check="recent"``
    #: Delete only the session's own blob shapes (layout 1, whose folders may hold a
    #: nested store's blobs), not everything under the folder.
    shared_folder: bool = False

    def segment(self, number: int) -> str:
        """The blob name of segment ``number``."""
        return segment_name(self.folder_path, number)

    def pointer(self, token: str) -> str:
        """The blob name of an oversized batch."""
        return pointer_name(self.folder_path, token)

    def metadata(self, incarnation: str, **extra: int) -> dict[str, str]:
        """Metadata of a new segment: the session id (base64: headers are ASCII), the
        incarnation, and ``extra`` integers."""
        encoded = base64.urlsafe_b64encode(self.session_id.encode("utf-8")).decode("ascii")
        metadata = {META_SESSION: encoded, META_INCARNATION: incarnation}
        metadata.update({key: str(value) for key, value in extra.items()})
        return metadata


def meta(metadata: Mapping[str, str], key: str) -> str | None:
    """``metadata[key]``, matching names case-insensitively as the service does."""
    value = metadata.get(key)
    if value is None:
        for name, candidate in metadata.items():
            if name.lower() == key:
                return candidate
    return value


def meta_int(metadata: Mapping[str, str], key: str) -> int | None:
    """An integer metadata value, or ``None``."""
    value = meta(metadata, key)
    return int(value) if value is not None and value.isdigit() else None


def session_id_from_metadata(metadata: Mapping[str, str]) -> str | None:
    """The session id stored in a segment's metadata, or ``None``."""
    encoded = meta(metadata, META_SESSION)
    if encoded is None:
        return None
    try:
        return base64.urlsafe_b64decode(encoded.encode("ascii")).decode("utf-8")
    except (ValueError, UnicodeError):
        return None


#: Unsettled appends remembered per session.
_MAX_ATTEMPTS_REMEMBERED = 8


class SessionCache:
    """A store handle's per-session hints: cursors, seen ids and unsettled appends (the
    least recently used sessions are forgotten first).

    Only hints: every write is conditional on the service, so losing or mixing them up costs
    a re-read, never a wrong write. Thread-safe.
    """

    def __init__(self, capacity: int, seen_ids: int) -> None:
        self._capacity = capacity
        self._seen_ids = seen_ids
        self._lock = threading.Lock()
        self._cursors: OrderedDict[str, Cursor] = OrderedDict()
        self._seen: OrderedDict[str, Seen] = OrderedDict()
        self._indexes: OrderedDict[str, IdIndex] = OrderedDict()
        self._attempts: dict[str, list[tuple[int, int, int]]] = {}

    def cursor(self, session_id: str) -> Cursor | None:
        """The last cursor of ``session_id``, if any."""
        with self._lock:
            return self._cursors.get(session_id)

    def seen(self, session_id: str) -> Seen:
        """The :class:`Seen` ids of ``session_id`` (created empty)."""
        with self._lock:
            seen = self._seen.get(session_id)
            if seen is None:
                seen = self._seen[session_id] = Seen(self._seen_ids)
                if len(self._seen) > self._capacity:
                    self._seen.popitem(last=False)
            else:
                self._seen.move_to_end(session_id)
            return seen

    def index(self, session_id: str) -> IdIndex:
        """The :class:`IdIndex` of ``session_id`` (created empty)."""
        with self._lock:
            index = self._indexes.get(session_id)
            if index is None:
                index = self._indexes[session_id] = IdIndex()
                if len(self._indexes) > self._capacity:
                    self._indexes.popitem(last=False)
            else:
                self._indexes.move_to_end(session_id)
            return index

    def remember(self, session_id: str, cursor: Cursor | None) -> None:
        """Keep ``cursor`` as the session's latest (``None`` changes nothing)."""
        if cursor is None:
            return
        with self._lock:
            self._cursors[session_id] = cursor
            self._cursors.move_to_end(session_id)
            if len(self._cursors) > self._capacity:
                self._cursors.popitem(last=False)

    def attempts(self, session_id: str) -> list[tuple[int, int, int]]:
        """Unsettled appends of the session, to check before the next one."""
        with self._lock:
            return list(self._attempts.get(session_id, ()))

    def unsettled(self, session_id: str, attempt: tuple[int, int, int] | None) -> None:
        """Record an append whose outcome is unknown."""
        if attempt is None:
            return
        with self._lock:
            attempts = self._attempts.setdefault(session_id, [])
            attempts.append(attempt)
            del attempts[:-_MAX_ATTEMPTS_REMEMBERED]

    def settled(self, session_id: str, checked: list[tuple[int, int, int]]) -> None:
        """Drop unsettled appends that a successful append has checked."""
        if not checked:
            return
        with self._lock:
            remaining = [a for a in self._attempts.get(session_id, ()) if a not in checked]
            if remaining:
                self._attempts[session_id] = remaining
            else:
                self._attempts.pop(session_id, None)

    def forget(self, session_id: str) -> None:
        """Drop everything about the session (after a delete)."""
        with self._lock:
            self._cursors.pop(session_id, None)
            self._seen.pop(session_id, None)
            self._indexes.pop(session_id, None)
            self._attempts.pop(session_id, None)
