"""Export, import and migrate: a store's sessions copied record for record.

Everything here works on the raw logs (``store.read`` / ``store.append``), so message
records and the core's control records (fork links, undo retracts, checkpoints) are copied
alike and byte for byte: a copied session has the same view as the original. Reads go in
bounded pages and sessions are listed lazily, so memory stays bounded however big the store
is. Sync, on the stores' blocking hooks::

    from chatkeep.core import open_store
    from chatkeep.core.transfer import export_jsonl, import_jsonl, migrate

    with open("backup.jsonl", "w") as out:
        export_jsonl(open_store("sqlite:///chats.db"), out)
    migrate(open_store("sqlite:///chats.db"), open_store("postgresql://localhost/app"))

Each has an ``a``-prefixed async twin (:func:`aexport_jsonl`, :func:`aimport_jsonl`,
:func:`amigrate`, :func:`averify`) that runs the same streaming transfer in a worker
thread, so an event loop stays free while a large store is copied.

**The export format** (JSON Lines in UTF-8, one JSON object a line, version
:data:`FORMAT_VERSION`)::

    {"chatkeep":"export","version":2,"created":"2026-12-01T16:00:00Z","backend":"sqlite"}
    {"session":"chat-1","n":0,"id":"0193...","json":{"type":"message","role":"user",...}}
    {"session":"chat-1","n":1,"id":"0193...","text":"not JSON, but UTF-8 text"}
    {"session":"chat-1","n":2,"id":"0193...","data":"/9j/4AAQSkZJRg=="}
    {"chatkeep":"end","sessions":1,"records":3}

The header comes first; then one line per record: its session id, its position ``n`` in
that session's log, its record id and its bytes, in log order, the records of a session on
consecutive lines; then an end line with the counts, so a file cut short is noticed. A
record's bytes are written the most readable way that gives them back exactly, so an export
can be searched with ``grep`` and ``jq``: ``json`` holds the record itself when it is JSON
that the compact UTF-8 encoding (``separators=(",", ":")``, ``ensure_ascii=False``)
writes back byte for byte, as every message and control record the core writes is;
``text`` holds it as a string when it is other UTF-8 text; ``data`` holds it in standard
base64 otherwise. A line whose ids cannot be UTF-8 (lone surrogates) is written in ASCII
with ``\\u`` escapes. Readers refuse versions they do not know; version 1 (every record in
``data``, the format of chatkeep before 2026-12) is still read.

Which sessions: every conversation of the store (``list_conversations``: the core's
temporary ``chatkeep.tmp.*`` sessions left out; finish an interrupted ``delete_session`` by
calling it again before exporting), or the ones named in ``sessions=``. A fork reads its
prefix from its parent: copy the two together.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import IO, Any, Final

from .errors import (
    InvalidExport,
    InvalidRecord,
    InvalidSessionId,
    RecordConflict,
    SessionMismatch,
    SessionNotFound,
    VerificationFailed,
)
from .records import Record, check_records, check_session_id
from .store import Store
from .views._log import list_conversations
from .views._program import run
from .views._walk import fork_of, probe_length

__all__ = [
    "FORMAT_VERSION",
    "InvalidExport",
    "SessionMismatch",
    "TransferProgress",
    "TransferStats",
    "VerificationFailed",
    "aexport_jsonl",
    "aimport_jsonl",
    "amigrate",
    "averify",
    "export_jsonl",
    "import_jsonl",
    "migrate",
    "verify",
]

#: The version of the export format this module writes.
FORMAT_VERSION: Final = 2
#: The versions it reads: 1 (every record in base64) and 2.
READABLE_VERSIONS: Final = frozenset({1, 2})
#: The payload keys of a record line, one per line.
_PAYLOADS: Final = ("json", "text", "data")
_LINE_BREAKS: Final = {ord(c): f"\\u{ord(c):04x}" for c in "\x85\u2028\u2029"}
# How a ``json`` payload is written back into bytes (the codec's own encoding).
_compact = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode

#: At most this many records per read (and per append of a migration or an import).
PAGE_RECORDS = 500
#: Pages shrink so that one holds about this many bytes of record data.
PAGE_BYTES = 4 * 1024 * 1024

_EXPORT = "export"
_END = "end"


@dataclass(frozen=True)
class TransferProgress:
    """Where an export, import or migration stands; handed to the ``progress`` callback
    after each page of records.

    ``sessions_total`` is known only when the sessions were named (``None`` while a store
    is listed lazily, and for imports). ``records_done`` counts the records handled so far
    (copied or found already there), ``bytes_done`` the bytes of record data copied.
    ``session_id`` is the session being copied, ``elapsed`` the seconds since the start.
    """

    sessions_done: int
    sessions_total: int | None
    records_done: int
    bytes_done: int
    session_id: str | None
    elapsed: float


@dataclass(frozen=True)
class TransferStats:
    """What an export, import or migration did: the sessions it went through, the records
    it copied (written to the file, or appended to the destination), the records it skipped
    because the destination already held them at the same place (a re-run), and the bytes
    of record data it copied."""

    sessions: int
    records_copied: int
    records_skipped: int
    bytes: int


ProgressCallback = Callable[[TransferProgress], None]


class _Tally:
    """Running counts, and the progress callback fed from them."""

    def __init__(self, progress: ProgressCallback | None, total: int | None) -> None:
        self.progress = progress
        self.total = total
        self.started = time.monotonic()
        self.sessions = 0
        self.copied = 0
        self.skipped = 0
        self.bytes = 0
        self.session_id: str | None = None

    def copy(self, records: list[Record]) -> None:
        self.copied += len(records)
        self.bytes += sum(len(record.data) for record in records)

    def report(self) -> None:
        if self.progress is not None:
            self.progress(
                TransferProgress(
                    sessions_done=self.sessions,
                    sessions_total=self.total,
                    records_done=self.copied + self.skipped,
                    bytes_done=self.bytes,
                    session_id=self.session_id,
                    elapsed=time.monotonic() - self.started,
                )
            )

    def stats(self) -> TransferStats:
        return TransferStats(self.sessions, self.copied, self.skipped, self.bytes)


def _append(store: Store, session_id: str, batch: list[Record], tally: _Tally) -> None:
    """Append one batch. A :class:`RecordConflict` refuses the whole batch, so the records
    before the conflicting one are appended on their own first: everything before the
    conflict is stored, as the error's callers are told."""
    try:
        store.append(session_id, batch)
    except RecordConflict as conflict:
        before = next(
            (index for index, record in enumerate(batch) if record.id == conflict.record_id), 0
        )
        if before:
            store.append(session_id, batch[:before])
            tally.copy(batch[:before])
        raise
    tally.copy(batch)


# -- which sessions, and reading them in pages -----------------------------------------------


def _named(store: Store, sessions: Iterable[str]) -> list[str]:
    """The named sessions, once each and in order; each must hold records."""
    if isinstance(sessions, (str, bytes)):
        raise TypeError("sessions must be an iterable of session ids, not a single string")
    named = list(dict.fromkeys(check_session_id(session_id) for session_id in sessions))
    for session_id in named:
        if not store.read(session_id, 0, 1):
            raise SessionNotFound(session_id)
    return named


def _ancestors(store: Store, session_id: str) -> list[str]:
    """The sessions ``session_id``'s view reads from, root first: the parent named by its
    fork record (its first record), that parent's parent, and so on. A parent that holds no
    records (erased without making its forks self-contained) ends the chain: there is
    nothing of it to copy."""
    chain: list[str] = []
    seen = {session_id}
    current = session_id
    while True:
        first = store.read(current, 0, 1)
        fork = fork_of(current, first[0]) if first else None
        if fork is None:
            break
        parent: str = fork["parent"]
        if parent in seen or not store.read(parent, 0, 1):
            break
        seen.add(parent)
        chain.append(parent)
        current = parent
    chain.reverse()
    return chain


def _with_ancestors(store: Store, named: list[str]) -> list[str]:
    """The named sessions, each preceded by the sessions its forks read from (once each)."""
    ordered: dict[str, None] = {}
    for session_id in named:
        for ancestor in _ancestors(store, session_id):
            ordered.setdefault(ancestor)
        ordered.setdefault(session_id)
    return list(ordered)


def _sessions(store: Store, sessions: Iterable[str] | None) -> tuple[Iterator[str], int | None]:
    """The sessions to go through, and how many (``None``: listed lazily, not counted).
    Named sessions come with their forks' ancestors (:func:`_with_ancestors`)."""
    if sessions is None:
        return list_conversations(store), None
    named = _with_ancestors(store, _named(store, sessions))
    return iter(named), len(named)


def _page_size(page: list[Record]) -> int:
    """How many records the next page should ask for after ``page`` (non-empty): at most
    :data:`PAGE_RECORDS`, about :data:`PAGE_BYTES` bytes of records like these."""
    average = max(sum(len(record.data) for record in page) // len(page), 1)
    return max(1, min(PAGE_RECORDS, PAGE_BYTES // average))


def _pages(store: Store, session_id: str, start: int = 0) -> Iterator[list[Record]]:
    """The session's records from ``start`` on, in pages of at most :data:`PAGE_RECORDS`
    records that shrink to about :data:`PAGE_BYTES` bytes when records are large."""
    size = PAGE_RECORDS
    while True:
        page = store.read(session_id, start, start + size)
        if not page:
            return
        yield page
        if len(page) < size:
            return
        start += len(page)
        size = _page_size(page)


# -- export --------------------------------------------------------------------------------


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _line(value: dict[str, Any]) -> str:
    # UTF-8 text, readable; JSON escapes newlines, so a line stays a line. Ids with lone
    # surrogates cannot be UTF-8: that line is written in ASCII with \u escapes.
    line = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    try:
        line.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(value, ensure_ascii=True, separators=(",", ":")) + "\n"
    # Characters some readers take for line breaks (str.splitlines does) are escaped; they
    # can only be inside strings, where an escape means the same.
    return line.translate(_LINE_BREAKS) + "\n"


def _payload(data: bytes) -> tuple[str, Any]:
    """The most readable form of a record's bytes that gives them back exactly."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return "data", base64.b64encode(data).decode("ascii")
    if text[:1] in ("{", "["):
        try:
            value = json.loads(text)
            if _compact(value) == text:
                return "json", value
        except ValueError:
            pass
    return "text", text


def _bytes_of(key: str, payload: Any, line: int) -> bytes:
    """A record line's payload back into the record's bytes."""
    if key == "json":
        try:
            return _compact(payload).encode("utf-8")
        except (ValueError, UnicodeEncodeError) as exc:
            raise InvalidExport(line, f"json is not a record this format writes ({exc})") from None
    if type(payload) is not str:
        kind = "base64 string" if key == "data" else "string"
        raise InvalidExport(line, f"{key} must be a {kind}, not {type(payload).__name__}")
    if key == "text":
        try:
            return payload.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidExport(line, "text is not valid Unicode text") from None
    try:
        return base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise InvalidExport(line, f"data is not valid base64 ({exc})") from None


def export_jsonl(
    store: Store,
    out: IO[str],
    *,
    sessions: Iterable[str] | None = None,
    progress: ProgressCallback | None = None,
) -> TransferStats:
    """Write the store's sessions to ``out`` in the export format (the module docstring).

    :param store: an open store.
    :param out: a text stream (a file opened with ``"w"``, ``sys.stdout``, ``io.StringIO``).
    :param sessions: the ids to export (each must hold records, else
        :class:`~chatkeep.core.errors.SessionNotFound`), with the sessions their forks read
        from; ``None``: every conversation of the store (needs the ``list_sessions``
        capability).
    :param progress: called with a :class:`TransferProgress` after each page.
    :returns: the :class:`TransferStats` (every record exported counts as copied).
    """
    ids, total = _sessions(store, sessions)
    tally = _Tally(progress, total)
    header = {"chatkeep": _EXPORT, "version": FORMAT_VERSION, "created": _now()}
    out.write(_line({**header, "backend": store.name}))
    for session_id in ids:
        tally.session_id = session_id
        position = 0
        for page in _pages(store, session_id):
            lines = []
            for record in page:
                key, payload = _payload(record.data)
                lines.append(
                    _line({"session": session_id, "n": position, "id": record.id, key: payload})
                )
                position += 1
            out.write("".join(lines))
            tally.copy(page)
            tally.report()
        if position:
            tally.sessions += 1
            tally.report()
    out.write(_line({"chatkeep": _END, "sessions": tally.sessions, "records": tally.copied}))
    out.flush()
    return tally.stats()


# -- import --------------------------------------------------------------------------------


class _Importer:
    """Appends the records of one session's consecutive lines, in batches.

    A record at a position the destination already fills is compared with what is there:
    the same record is skipped (a re-import), another record with the same id is a
    :class:`RecordConflict`, any other record means the destination's session is not this
    one and the rest is left to ``append`` (idempotent by record id).
    """

    def __init__(self, store: Store, tally: _Tally) -> None:
        self.store = store
        self.tally = tally
        self.session_id: str | None = None
        self.next = 0  # the position the next line of this session must have
        self.length = 0  # the destination's length when this session's lines began
        self.diverged = False
        self.window: list[Record] = []  # destination records from window_start on
        self.window_start = 0
        self.window_size = PAGE_RECORDS
        self.batch: list[Record] = []
        self.batch_bytes = 0
        self.batch_ids: set[str] = set()

    def begin(self, session_id: str, position: int, line: int) -> None:
        self.flush()
        length, _ = run(self.store, probe_length(session_id))
        if position > length:
            raise InvalidExport(
                line,
                f"session {session_id!r} resumes at record {position} but the destination "
                f"holds only {length} of its records (lines are missing)",
            )
        self.session_id = session_id
        self.next = position
        self.length = length
        self.diverged = False
        self.window = []
        self.window_start = position
        self.window_size = PAGE_RECORDS
        self.tally.session_id = session_id
        self.tally.sessions += 1

    def _stored_at(self, position: int) -> Record:
        offset = position - self.window_start
        if not 0 <= offset < len(self.window):
            assert self.session_id is not None
            stop = min(position + self.window_size, self.length)
            self.window = self.store.read(self.session_id, position, stop)
            self.window_start = position
            offset = 0
            if not self.window:  # the destination shrank meanwhile (deleted)
                self.length = position
                raise IndexError(position)
            self.window_size = _page_size(self.window)
        return self.window[offset]

    def add(self, record: Record, line: int) -> None:
        assert self.session_id is not None
        position = self.next
        self.next += 1
        if position < self.length and not self.diverged:
            try:
                stored = self._stored_at(position)
            except IndexError:
                stored = None
            if stored == record:
                self.tally.skipped += 1
                if self.tally.skipped % PAGE_RECORDS == 0:
                    self.tally.report()
                return
            if stored is not None and stored.id == record.id:
                self.flush()
                raise RecordConflict(self.session_id, record.id)
            self.diverged = True
        if record.id in self.batch_ids:
            raise InvalidExport(
                line,
                f"record id {record.id!r} appears twice in session {self.session_id!r}",
            )
        self.batch.append(record)
        self.batch_ids.add(record.id)
        self.batch_bytes += len(record.data)
        if len(self.batch) >= PAGE_RECORDS or self.batch_bytes >= PAGE_BYTES:
            self.flush()

    def flush(self) -> None:
        if not self.batch:
            return
        assert self.session_id is not None
        batch = self.batch
        self.batch, self.batch_bytes, self.batch_ids = [], 0, set()
        _append(self.store, self.session_id, batch, self.tally)
        self.tally.report()


def _parse(text: str, line: int) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise InvalidExport(line, f"not JSON ({exc})") from None
    if not isinstance(value, dict):
        raise InvalidExport(line, f"a JSON {type(value).__name__}, not an object")
    return value


def _check_header(value: dict[str, Any], line: int) -> None:
    if value.get("chatkeep") != _EXPORT:
        raise InvalidExport(
            line, 'not a chatkeep export (the first line must be {"chatkeep": "export", ...})'
        )
    version = value.get("version")
    if type(version) is not int:
        raise InvalidExport(line, f"the header's version is {version!r}, not a number")
    if version not in READABLE_VERSIONS:
        newer = (
            " (a newer chatkeep wrote it: upgrade chatkeep-core)"
            if version > FORMAT_VERSION
            else ""
        )
        raise InvalidExport(
            line,
            f"export format version {version} is not one this chatkeep reads "
            f"(it reads versions {', '.join(map(str, sorted(READABLE_VERSIONS)))}){newer}",
        )


def _record_of(value: dict[str, Any], line: int) -> tuple[str, int, Record]:
    keys = set(value)
    payloads = keys - {"session", "n", "id"}
    if (
        keys - payloads != {"session", "n", "id"}
        or len(payloads) != 1
        or not (payloads <= set(_PAYLOADS))
    ):
        raise InvalidExport(
            line,
            "a record line has exactly the keys session, n, id and one of json, text or data "
            f"(this one has {', '.join(sorted(keys)) or 'none'})",
        )
    (key,) = payloads
    session_id, position, record_id = (value[k] for k in ("session", "n", "id"))
    try:
        session_id = check_session_id(session_id)
    except InvalidSessionId as exc:
        raise InvalidExport(line, str(exc)) from None
    if type(position) is not int or position < 0:
        raise InvalidExport(line, f"n must be a position (an int >= 0), not {position!r}")
    raw = _bytes_of(key, value[key], line)
    try:
        (record,) = check_records([(record_id, raw)])
    except InvalidRecord as exc:
        reason = str(exc).replace("record 0 of the batch", "the record")
        raise InvalidExport(line, reason) from None
    return session_id, position, record


def _read_lines(source: IO[str], importer: _Importer) -> None:
    """Import every line of ``source``; raises :class:`InvalidExport` (line numbers from
    1) at the first line that is wrong, with the batch before it still pending."""
    header_seen = False
    end: dict[str, Any] | None = None
    end_line = records = number = 0
    for number, text in enumerate(source, start=1):
        if number == 1:
            text = text.removeprefix("\ufeff")  # a byte-order mark some editors add
        if not text.strip():
            continue
        value = _parse(text, number)
        if not header_seen:
            _check_header(value, number)
            header_seen = True
            continue
        if end is not None:
            raise InvalidExport(number, "a line after the end line")
        if "chatkeep" in value:
            if value["chatkeep"] != _END:
                raise InvalidExport(number, f"an unknown marker line {value['chatkeep']!r}")
            end, end_line = value, number
            continue
        session_id, position, record = _record_of(value, number)
        if session_id != importer.session_id:
            importer.begin(session_id, position, number)
        elif position != importer.next:
            raise InvalidExport(
                number,
                f"record {position} of session {session_id!r} where record "
                f"{importer.next} was due (the records of a session are in log order)",
            )
        importer.add(record, number)
        records += 1
    if not header_seen:
        raise InvalidExport(max(number, 1), "empty: not a chatkeep export")
    if end is None:
        raise InvalidExport(number + 1, "the export ends without its end line: it was cut short")
    sessions = importer.tally.sessions
    if end.get("records") != records or end.get("sessions") != sessions:
        raise InvalidExport(
            end_line,
            f"the end line counts {end.get('sessions')!r} sessions and {end.get('records')!r} "
            f"records, the lines hold {sessions} and {records}: lines are missing",
        )


def import_jsonl(
    store: Store, source: IO[str], *, progress: ProgressCallback | None = None
) -> TransferStats:
    """Append the records of an export (the module docstring's format) to ``store``.

    Importing a file twice imports nothing new: a record the destination already holds at
    its place is skipped, and appends are idempotent by record id. A record id the
    destination holds with other data raises :class:`~chatkeep.core.errors.RecordConflict`
    (the records of the lines before it are stored). A malformed or truncated file raises
    :class:`~chatkeep.core.errors.InvalidExport` naming the line: the records of the lines
    before it are stored, nothing of it or after it, so importing the repaired file
    completes the import.

    :param store: an open store to import into.
    :param source: a text stream positioned at the header (a file opened with ``"r"``).
    :param progress: called with a :class:`TransferProgress` after each batch.
    :returns: the :class:`TransferStats`.
    """
    tally = _Tally(progress, None)
    importer = _Importer(store, tally)
    try:
        _read_lines(source, importer)
    except InvalidExport as error:
        importer.flush()  # the lines before the bad one are stored, as the error says
        raise InvalidExport(error.line, error.reason, tally.copied) from None
    importer.flush()
    return tally.stats()


# -- migrate and verify --------------------------------------------------------------------


def _held(source: Store, destination: Store, session_id: str) -> int:
    """How many leading records of the source's log the destination already holds, the
    same and in the same places (where a re-run continues). Costs O(log n) one-record
    reads when the destination is a prefix of the source (the resume case)."""
    length, last = run(destination, probe_length(session_id))
    if not length:
        return 0
    mine = source.read(session_id, length - 1, length)
    if mine and mine[0] == last:
        return length
    held = 0  # not a prefix as a whole: find where the two logs part
    for page in _pages(source, session_id):
        theirs = destination.read(session_id, held, held + len(page))
        for ours, stored in zip(page, theirs, strict=False):
            if ours != stored:
                return held
            held += 1
        if len(theirs) < len(page):
            return held
    return held


def _copy_session(source: Store, destination: Store, session_id: str, tally: _Tally) -> None:
    start = _held(source, destination, session_id)
    tally.skipped += start
    for page in _pages(source, session_id, start):
        _append(destination, session_id, page, tally)
        tally.report()


def _digest(store: Store, session_id: str) -> tuple[int, str]:
    """The number of records and a BLAKE2b digest of their ids and data, in log order."""
    digest = hashlib.blake2b(digest_size=32)
    count = 0
    for page in _pages(store, session_id):
        for record in page:
            key = record.id.encode("utf-8", "surrogatepass")
            digest.update(len(key).to_bytes(8, "big"))
            digest.update(key)
            digest.update(len(record.data).to_bytes(8, "big"))
            digest.update(record.data)
        count += len(page)
    return count, digest.hexdigest()


def _compare(source: Store, destination: Store, session_id: str) -> SessionMismatch | None:
    source_count, source_digest = _digest(source, session_id)
    destination_count, destination_digest = _digest(destination, session_id)
    if (source_count, source_digest) == (destination_count, destination_digest):
        return None
    return SessionMismatch(
        session_id, source_count, destination_count, source_digest, destination_digest
    )


def verify(
    source: Store, destination: Store, *, sessions: Iterable[str] | None = None
) -> list[SessionMismatch]:
    """Compare each session of ``source`` with the same session of ``destination``: record
    counts and a BLAKE2b digest over the record ids and data in log order.

    :param source: the store copied from.
    :param destination: the store copied to (sessions only it holds are not looked at).
    :param sessions: the ids to compare, with the sessions their forks read from in
        ``source``; ``None``: every conversation of ``source``.
    :returns: one :class:`SessionMismatch` per session that differs (``[]``: all equal).
    """
    if isinstance(sessions, (str, bytes)):
        raise TypeError("sessions must be an iterable of session ids, not a single string")
    if sessions is None:
        ids: Iterable[str] = list_conversations(source)
    else:
        ids = _with_ancestors(source, [check_session_id(s) for s in sessions])
    found = []
    for session_id in ids:
        mismatch = _compare(source, destination, session_id)
        if mismatch is not None:
            found.append(mismatch)
    return found


def migrate(
    source: Store,
    destination: Store,
    *,
    sessions: Iterable[str] | None = None,
    progress: ProgressCallback | None = None,
    verify: bool = True,
) -> TransferStats:
    """Copy sessions from ``source`` to ``destination`` (any two backends), record for
    record, then check each copy.

    Resumable: a session the destination already holds in part continues after its last
    record (found in O(log n) reads), so a migration killed part way and run again copies
    each record once; a batch appended twice is harmless (appends are idempotent by id).
    With ``verify`` (the default) each session is then compared (counts and a content
    digest, see :func:`verify`), and any difference raises
    :class:`~chatkeep.core.errors.VerificationFailed` with the mismatches, after every
    session was copied. A record id the destination holds with other data raises
    :class:`~chatkeep.core.errors.RecordConflict`.

    :param source: the store to copy from (not changed).
    :param destination: the store to copy into.
    :param sessions: the ids to copy (each must hold records), with the sessions their
        forks read from (copied first); ``None``: every conversation.
    :param progress: called with a :class:`TransferProgress` after each page.
    :param verify: compare each session after copying it.
    :returns: the :class:`TransferStats`.
    """
    ids, total = _sessions(source, sessions)
    tally = _Tally(progress, total)
    mismatches: list[SessionMismatch] = []
    for session_id in ids:
        tally.session_id = session_id
        _copy_session(source, destination, session_id, tally)
        tally.sessions += 1
        if verify:
            mismatch = _compare(source, destination, session_id)
            if mismatch is not None:
                mismatches.append(mismatch)
        tally.report()
    if mismatches:
        raise VerificationFailed(mismatches)
    return tally.stats()


# -- async twins ----------------------------------------------------------------------------
#
# The transfer runs on the stores' blocking hooks in one worker thread (asyncio.to_thread):
# the same bounded pages and lazy listing, so it streams exactly like the sync call, and the
# caller's event loop stays free meanwhile (the pattern the LangChain adapter uses: no event
# loop is ever tied to a store). ``progress`` is called from that worker thread; ``out`` and
# ``source`` are written and read there, so hand in a stream no other task uses meanwhile.


async def aexport_jsonl(
    store: Store,
    out: IO[str],
    *,
    sessions: Iterable[str] | None = None,
    progress: ProgressCallback | None = None,
) -> TransferStats:
    """Async :func:`export_jsonl` (in a worker thread; ``progress`` is called there)."""
    import asyncio

    return await asyncio.to_thread(export_jsonl, store, out, sessions=sessions, progress=progress)


async def aimport_jsonl(
    store: Store, source: IO[str], *, progress: ProgressCallback | None = None
) -> TransferStats:
    """Async :func:`import_jsonl` (in a worker thread; ``progress`` is called there)."""
    import asyncio

    return await asyncio.to_thread(import_jsonl, store, source, progress=progress)


async def averify(
    source: Store, destination: Store, *, sessions: Iterable[str] | None = None
) -> list[SessionMismatch]:
    """Async :func:`verify` (in a worker thread)."""
    import asyncio

    return await asyncio.to_thread(verify, source, destination, sessions=sessions)


async def amigrate(
    source: Store,
    destination: Store,
    *,
    sessions: Iterable[str] | None = None,
    progress: ProgressCallback | None = None,
    verify: bool = True,
) -> TransferStats:
    """Async :func:`migrate` (in a worker thread; ``progress`` is called there)."""
    import asyncio

    return await asyncio.to_thread(
        migrate, source, destination, sessions=sessions, progress=progress, verify=verify
    )
