"""Appending to a session log (and deleting one), written once for sync and async.

Each function is a generator (:data:`~._operations.Step`) that yields storage operations.
The invariants:

* Every append is one frame written by one Append Block call conditioned on the segment's
  length (``appendpos``) and version (``If-Match``). Appends are atomic and never overwrite
  each other; a writer that lost a race re-reads what it missed and tries again.
* A writer that re-reads learns the record ids it finds. Records whose ids the handle knows
  to be stored are skipped, so a batch whose earlier try landed (a lost response, a client
  retry, a retried call) is not stored twice. An append whose outcome stays unknown raises
  :class:`~._state.Unsettled` with the position it tried; the next append checks it first.
* A segment nearing the service's 50,000-block limit ends with a ROLL frame; the session
  continues in the next segment, created with metadata saying where the previous one ends.
"""

from __future__ import annotations

import contextlib
import random
import secrets
import time
import zlib
from collections.abc import Iterable
from dataclasses import replace

from chatkeep.core import AppendConflict, Record

from . import frames as fmt
from ._locate import DamagedEnd, Tail, last_frame, load_tail, locate
from ._operations import (
    Appended,
    BlobExists,
    BlobMissing,
    ConditionFailed,
    ContainerMissing,
    CreateContainer,
    Delete,
    OutcomeUnknown,
    SegmentFull,
    SetMetadata,
    Sleep,
    Step,
    Upload,
    append_block,
    create,
    get,
    list_names,
)
from ._state import (
    DEFAULT_RECORD_BYTES,
    META_BASE,
    META_INCARNATION,
    META_LAST,
    META_PREVIOUS,
    Contended,
    Cursor,
    Log,
    Restart,
    Unsettled,
    meta,
    meta_int,
)
from .frames import FrameError
from .layout import is_session_blob, segment_number

__all__ = ["append", "append_if", "delete"]

_ROLL_FRAME_SIZE = fmt.FRAME_OVERHEAD + 4


def _create_segment(log: Log, number: int, metadata: dict[str, str]) -> Step[str | None]:
    """Create segment ``number``: its etag, or ``None`` if another writer created it."""
    for _ in range(2):
        try:
            created = yield from create(log.segment(number), metadata)
        except BlobExists:
            return None
        except ContainerMissing:
            if not log.create_container:
                raise
            yield CreateContainer()
            continue
        return created.etag
    return None


def _new_session(log: Log, record_bytes: int) -> Step[Cursor | None]:
    """Create segment 0 of a new life of the session; ``None`` if it already exists."""
    incarnation = secrets.token_hex(8)
    etag = yield from _create_segment(log, 0, log.metadata(incarnation, **{META_BASE: 0}))
    if etag is None:
        return None
    return Cursor(incarnation, 0, 0, 0, 0, etag, None, record_bytes)


def _writable(log: Log, record_bytes: int, absent: bool = False) -> Step[Cursor]:
    """A cursor at the true end of the session, creating segment 0 (or the segment after a
    ROLL) when missing. Learns the ids of the frames it reads. ``absent``: the session was
    missing when last seen, so try creating it first."""
    if absent:
        created = yield from _new_session(log, record_bytes)
        if created is not None:
            return created
    for _ in range(100):
        try:
            tail = yield from locate(log, None, log.limits.probe)
        except DamagedEnd as damaged:
            salvaged = yield from _salvage(log, damaged, record_bytes)
            if salvaged is None:
                continue  # the segment changed while it was read: look again
            return salvaged
        if tail is None:
            created = yield from _new_session(log, record_bytes)
            if created is None:
                continue  # another writer created it: read what is there
            return created
        log.seen.learn_frames(tail.incarnation, tail.frames())
        if tail.rolled:
            moved = yield from _follow_roll(log, tail)
            if moved is None:
                continue
            return moved
        return tail.cursor(record_bytes)
    raise Contended


def _salvage(log: Log, damaged: DamagedEnd, record_bytes: int) -> Step[Cursor | None]:
    """A cursor after a session end whose last frame is damaged, so the session stays
    appendable: the segment is read forward (once, only on damage) up to the damage, and
    the next frame goes after the damaged bytes, numbered as if they held one record. The
    damage stays reported by reads that reach it. ``None`` if the segment changed meanwhile;
    raises the :class:`FrameError` if no frame before the damage can be trusted."""
    name = log.segment(damaged.segment)
    size = damaged.blob.size
    parts: list[bytes] = []
    offset = 0
    etag = damaged.blob.etag
    metadata = damaged.blob.metadata
    while offset < size:
        blob = yield from get(name, offset, min(log.limits.max_get, size - offset))
        if blob.size != size or blob.etag != etag or not blob.data:
            return None
        parts.append(blob.data)
        offset += len(blob.data)
    content = b"".join(parts)
    good = fmt.scan_forward(content, 0, 0, lenient=True).frames
    if good and good[-1].kind == fmt.KIND_ROLL:
        raise FrameError(damaged.offset, damaged.reason, damaged.position)
    before = good[-1].total if good else meta_int(metadata, META_BASE)
    if before is None:
        raise FrameError(damaged.offset, damaged.reason, damaged.position)
    log.seen.learn_frames(meta(metadata, META_INCARNATION) or "", good[-64:])
    return Cursor(
        incarnation=meta(metadata, META_INCARNATION) or "",
        segment=damaged.segment,
        length=size,
        total=before + 1,
        blocks=damaged.blob.blocks,
        etag=etag,
        previous=meta_int(metadata, META_PREVIOUS),
        record_bytes=record_bytes,
    )


def _enter_next(
    log: Log, incarnation: str, number: int, end: int, total: int
) -> Step[Cursor | None]:
    """A cursor at the start of segment ``number``, created here after the previous segment
    ended (at ``end``, with ``total`` records) with a ROLL frame; ``None`` if another writer
    created it first (locate again)."""
    extra = {META_PREVIOUS: end, META_BASE: total}
    etag = yield from _create_segment(log, number, log.metadata(incarnation, **extra))
    if etag is None:
        return None
    # Best effort: name the new last segment in segment 0, so cold readers jump straight to it.
    with contextlib.suppress(BlobMissing, ConditionFailed):
        hint = log.metadata(incarnation, **{META_BASE: 0, META_LAST: number})
        yield SetMetadata(log.segment(0), hint)
    return Cursor(incarnation, number, 0, total, 0, etag, end)


def _follow_roll(log: Log, tail: Tail) -> Step[Cursor | None]:
    """:func:`_enter_next` for a tail that ends with a ROLL frame."""
    assert tail.last is not None
    number = fmt.decode_roll(tail.last.body, tail.last.start)
    return (yield from _enter_next(log, tail.incarnation, number, tail.blob.size, tail.total))


def _refresh(log: Log, cursor: Cursor, at_least: int) -> Step[Cursor]:
    """Catch the cursor up after a lost race or an unknown outcome: read what was appended
    since ``cursor.length``, learning its ids (our own batch, if it landed, is among them)."""
    want = max(log.limits.probe, at_least + fmt.FRAME_OVERHEAD)
    try:
        blob = yield from get(log.segment(cursor.segment), cursor.length, want)
    except BlobMissing:
        return (yield from _writable(log, cursor.record_bytes))
    life = meta(blob.metadata, META_INCARNATION) or ""
    if life != cursor.incarnation or blob.size < cursor.length:
        return (yield from _writable(log, cursor.record_bytes))
    if blob.size == cursor.length:
        return replace(cursor, etag=blob.etag, blocks=blob.blocks)
    try:
        scan = fmt.scan_forward(blob.data, blob.offset, cursor.length)
    except FrameError:  # damaged after the cursor: find (and salvage) the end from scratch
        return (yield from _writable(log, cursor.record_bytes))
    log.seen.learn_frames(life, scan.frames)
    if log.index is not None and scan.frames:
        log.index.advance(life, cursor.segment, cursor.length, scan.frames, scan.reached)
    if blob.reaches_end and scan.wanted is None and scan.frames:
        tail = Tail(cursor.segment, blob, scan.frames[-1], life)
    else:
        # More was appended than the window holds: others' records; take the real tail.
        try:
            window = yield from load_tail(log, cursor.segment, blob.size, log.limits.probe)
            if (meta(window.metadata, META_INCARNATION) or "") != life:
                raise Restart
            last, window = yield from last_frame(log, cursor.segment, window)
        except (Restart, BlobMissing, FrameError):
            return (yield from _writable(log, cursor.record_bytes))
        tail = Tail(cursor.segment, window, last, life)
        log.seen.learn_frames(life, tail.frames())
    if tail.rolled:
        moved = yield from _follow_roll(log, tail)
        if moved is None:
            return (yield from _writable(log, cursor.record_bytes))
        return moved
    return tail.cursor(cursor.record_bytes)


def _roll(log: Log, cursor: Cursor) -> Step[Cursor]:
    """End the cursor's segment with a ROLL frame and move to the next segment."""
    body = fmt.encode_roll(cursor.segment + 1)
    frame = fmt.encode_frame(fmt.KIND_ROLL, body, 0, cursor.total)
    try:
        yield from append_block(log.segment(cursor.segment), frame, cursor.length, cursor.etag)
    except ConditionFailed:
        return (yield from _refresh(log, cursor, 0))
    except BlobMissing:
        return (yield from _writable(log, cursor.record_bytes))
    end = cursor.length + len(frame)
    if log.index is not None:
        log.index.rolled(cursor.incarnation, cursor.segment, cursor.length)
    moved = yield from _enter_next(log, cursor.incarnation, cursor.segment + 1, end, cursor.total)
    if moved is None:
        return (yield from _writable(log, cursor.record_bytes))
    return replace(moved, record_bytes=cursor.record_bytes)


def _needs_roll(cursor: Cursor, frame_size: int, log: Log) -> bool:
    # Keep room for this block and for the ROLL block that will end the segment.
    if cursor.blocks + 2 > log.limits.segment_blocks:
        return True
    return cursor.length + frame_size + _ROLL_FRAME_SIZE > log.limits.segment_bytes


def _check_attempts(log: Log, attempts: Iterable[tuple[int, int, int]]) -> Step[None]:
    """Read where earlier appends with unknown outcomes would have landed, learning the
    ids found there (so a batch that did land is skipped, not stored twice)."""
    for segment, position, size in attempts:
        try:
            blob = yield from get(log.segment(segment), position, size)
        except BlobMissing:
            continue
        if blob.offset > blob.size or not blob.data:
            continue
        life = meta(blob.metadata, META_INCARNATION) or ""
        found = fmt.scan_forward(blob.data, position, position, lenient=True).frames
        log.seen.learn_frames(life, found)


def _catch_up(log: Log, cursor: Cursor) -> Step[bool]:
    """Bring the session's :class:`~._state.IdIndex` up to ``cursor`` by reading the log
    from where the index ends: nothing when it is there already (a handle's own appends
    keep it there: the hot path), the whole session once per handle, or what others
    appended since. Returns whether the index now covers exactly the log before
    ``cursor`` (``False``: damage, or the session changed; the caller relies on the
    recent ids only, as with ``resend_check="recent"``)."""
    index = log.index
    if index is None:
        return False
    for _ in range(cursor.segment + 2):
        segment, offset = index.position(cursor.incarnation)
        if index.broken or (segment, offset) > (cursor.segment, cursor.length):
            return False
        if (segment, offset) == (cursor.segment, cursor.length):
            return True
        end = cursor.length if segment == cursor.segment else None
        try:
            indexed = yield from _index_segment(log, cursor.incarnation, segment, offset, end)
        except BlobMissing:
            return False
        if not indexed:
            return False
    return index.at(cursor.incarnation, cursor.segment, cursor.length)


def _index_segment(
    log: Log, incarnation: str, segment: int, offset: int, end: int | None
) -> Step[bool]:
    """Feed the index the frames of ``segment`` from ``offset`` up to ``end`` (``None``:
    to its ROLL frame or its end), downloading only those bytes. ``False`` if the segment
    is of another life, shorter than ``end``, or damaged (the index is then broken)."""
    index = log.index
    assert index is not None
    name = log.segment(segment)
    window, window_start, read_to = b"", offset, offset
    while True:
        limit = log.limits.max_get if end is None else min(log.limits.max_get, end - read_to)
        blob = yield from get(name, read_to, max(limit, 1))
        if (meta(blob.metadata, META_INCARNATION) or "") != incarnation:
            return False
        data = blob.data if end is None else blob.data[: end - read_to]
        window += data
        read_to += len(data)
        scan = fmt.scan_forward(window, window_start, window_start, lenient=True)
        if scan.frames:
            if not index.advance(incarnation, segment, window_start, scan.frames, scan.reached):
                return False
            if scan.frames[-1].kind == fmt.KIND_ROLL:
                return True
        window, window_start = window[scan.reached - window_start :], scan.reached
        stop_at = blob.size if end is None else end
        if read_to >= stop_at or not data:
            if window or (end is not None and read_to < end):
                index.broken = bool(window)  # bytes that are not a whole frame: damage
                return False
            return True
        if window and scan.wanted is None:
            index.broken = True  # a damaged frame: ids beyond it cannot be indexed
            return False


def _frame_for(
    log: Log, cursor: Cursor, fresh: list[Record], uploaded: dict[bytes, str]
) -> Step[tuple[bytes, bytes | None]]:
    """The frame that appends ``fresh`` after ``cursor`` (and the batch digest when it is an
    oversized batch stored as a separate blob, uploaded here once per call)."""
    body = fmt.encode_records(fresh)
    count = len(fresh)
    if len(body) + fmt.FRAME_OVERHEAD <= log.limits.max_block:
        return fmt.encode_frame(fmt.KIND_RECORDS, body, count, cursor.total + count), None
    # Too big for one block: store the batch as a block blob and append a small pointer to
    # it, so readers still see the whole batch appear at once (when the pointer lands).
    digest = fmt.ids_digest(fresh)
    token = uploaded.get(digest)
    if token is None:
        token = secrets.token_hex(16)
        for _ in range(2):
            try:
                yield Upload(log.pointer(token), body)
                break
            except ContainerMissing:
                if not log.create_container:
                    raise
                yield CreateContainer()
        uploaded[digest] = token
    pointer = fmt.encode_pointer(fmt.Pointer(len(body), zlib.crc32(body), digest, token))
    return fmt.encode_frame(fmt.KIND_POINTER, pointer, count, cursor.total + count), digest


def _appended(
    log: Log,
    cursor: Cursor,
    *,
    frame: bytes,
    fresh: list[Record],
    digest: bytes | None,
    appended: Appended,
) -> Cursor:
    """Remember ``fresh`` as stored and return the cursor after the frame just appended."""
    ids = [(record.id, fmt.data_digest(record.data)) for record in fresh]
    log.seen.learn(cursor.incarnation, ids, digest)
    if log.index is not None:
        where = (cursor.segment, cursor.length, cursor.length + len(frame))
        log.index.added(cursor.incarnation, where, ids, digest)
    size = len(frame) // len(fresh) if digest is None else cursor.record_bytes
    return replace(
        cursor,
        length=cursor.length + len(frame),
        total=cursor.total + len(fresh),
        blocks=appended.blocks,
        etag=appended.etag,
        record_bytes=max(1, (cursor.record_bytes * 3 + size) // 4),
    )


def append(
    log: Log,
    cursor: Cursor | None,
    records: list[Record],
    attempts: Iterable[tuple[int, int, int]] = (),
) -> Step[Cursor]:
    """Append ``records`` as one atomic frame; return the cursor after it.

    ``attempts`` are earlier writes whose outcome is unknown, checked first. Raises
    :class:`Unsettled` when this append's outcome is unknown and :class:`Contended` when it
    keeps losing races.
    """
    attempt: tuple[int, int, int] | None = None
    try:
        yield from _check_attempts(log, attempts)
        deadline = time.monotonic() + log.limits.contention_timeout
        record_bytes = cursor.record_bytes if cursor is not None else DEFAULT_RECORD_BYTES
        verified = conflicts = 0
        uploaded: dict[bytes, str] = {}
        while True:
            if time.monotonic() > deadline:
                raise Contended
            if cursor is None or cursor.absent:
                cursor = yield from _writable(log, record_bytes, absent=cursor is not None)
                verified = 1
            fresh = log.seen.unseen(cursor.incarnation, records, log.session_id)
            if fresh and log.index is not None and (yield from _catch_up(log, cursor)):
                fresh = log.index.unseen(fresh, log.session_id)
            if not fresh:
                if verified:
                    return cursor
                # All stored already, it seems: check this life of the session still is.
                cursor, verified = (yield from _refresh(log, cursor, 0)), 1
                continue
            frame, digest = yield from _frame_for(log, cursor, fresh, uploaded)
            if _needs_roll(cursor, len(frame), log):
                attempt = (cursor.segment, cursor.length, _ROLL_FRAME_SIZE)
                cursor, verified, attempt = (yield from _roll(log, cursor)), 1, None
                continue
            attempt = (cursor.segment, cursor.length, len(frame))
            try:
                appended = yield from append_block(
                    log.segment(cursor.segment), frame, cursor.length, cursor.etag
                )
            except ConditionFailed:
                # Lost a race, or an earlier try of this very request landed: re-read from
                # where we tried to write (our ids show up there if the batch is stored).
                conflicts += 1
                if conflicts > 2:
                    yield Sleep(random.uniform(0, min(0.25, 0.004 * 2 ** min(conflicts, 8))))
                cursor = yield from _refresh(log, cursor, len(frame))
                verified, attempt = 1, None
                continue
            except SegmentFull:
                cursor, attempt = replace(cursor, blocks=log.limits.segment_blocks), None
                continue
            except BlobMissing:
                cursor, attempt = None, None  # deleted meanwhile: a new life begins
                continue
            return _appended(
                log, cursor, frame=frame, fresh=fresh, digest=digest, appended=appended
            )
    except OutcomeUnknown as unknown:
        raise Unsettled(cursor, attempt) from unknown


def _last_id(log: Log, tail: Tail, record_bytes: int) -> Step[str | None]:
    """The id of the session's last record at ``tail`` (``None``: the session is empty)."""
    if tail.total == 0:
        return None
    frame = tail.last
    if frame is not None and frame.kind == fmt.KIND_RECORDS and frame.records:
        return fmt.decode_ids(frame.body, frame.records, frame.start)[-1]
    # An oversized batch, or a segment that starts empty after a ROLL: the read path knows.
    from ._read import read  # a function-level import: _read does not need _write

    records, _ = yield from read(log, tail.cursor(record_bytes), -1, None)
    return records[-1].id if records else None


def _checked_end(
    log: Log, records: list[Record], after: str | None, record_bytes: int
) -> Step[tuple[Cursor | None, list[Record]]]:
    """The session's end if its last record is ``after``, with the records not stored yet:
    ``(cursor, fresh)`` to write ``fresh`` at (``fresh`` empty: every record is stored
    already), ``(None, records)`` to look again; raises
    :class:`~chatkeep.core.AppendConflict` otherwise."""
    tail = yield from locate(log, None, log.limits.probe)
    if tail is None:
        if after is not None:
            raise AppendConflict(log.session_id, after)
        return (yield from _new_session(log, record_bytes)), records
    log.seen.learn_frames(tail.incarnation, tail.frames())
    fresh = log.seen.unseen(tail.incarnation, records, log.session_id)
    if fresh and log.index is not None and (yield from _catch_up(log, tail.cursor(record_bytes))):
        fresh = log.index.unseen(fresh, log.session_id)
    if not fresh:
        return tail.cursor(record_bytes), fresh
    if (yield from _last_id(log, tail, record_bytes)) != after:
        raise AppendConflict(log.session_id, after)
    if tail.rolled:
        yield from _follow_roll(log, tail)
        return None, records  # the same records, now ending in the next segment
    return tail.cursor(record_bytes), fresh


def append_if(
    log: Log,
    cursor: Cursor | None,
    records: list[Record],
    after: str | None,
    attempts: Iterable[tuple[int, int, int]] = (),
) -> Step[Cursor]:
    """Append ``records`` as one frame only if the session's last record is ``after``
    (``None``: empty); otherwise raise :class:`~chatkeep.core.AppendConflict`.

    The check reads the session's end; the write is conditioned on exactly that end (its
    length and version), so if anything lands in between, the write fails and the log is
    read again: our own earlier try is recognised by its ids, a metadata-only change is
    retried, anything else is a conflict. Records already stored (an exact retry) succeed
    as a no-op whatever the condition.
    """
    attempt: tuple[int, int, int] | None = None
    try:
        yield from _check_attempts(log, attempts)
        deadline = time.monotonic() + log.limits.contention_timeout
        record_bytes = cursor.record_bytes if cursor is not None else DEFAULT_RECORD_BYTES
        uploaded: dict[bytes, str] = {}
        while True:
            if time.monotonic() > deadline:
                raise Contended
            end, fresh = yield from _checked_end(log, records, after, record_bytes)
            if end is None:
                continue  # created or rolled by another writer meanwhile: look again
            cursor = end
            if not fresh:
                return cursor  # an exact retry of a call that landed
            frame, digest = yield from _frame_for(log, cursor, fresh, uploaded)
            if _needs_roll(cursor, len(frame), log):
                attempt = (cursor.segment, cursor.length, _ROLL_FRAME_SIZE)
                yield from _roll(log, cursor)
                attempt = None
                continue
            attempt = (cursor.segment, cursor.length, len(frame))
            try:
                appended = yield from append_block(
                    log.segment(cursor.segment), frame, cursor.length, cursor.etag
                )
            except ConditionFailed:
                # Something changed since the check: if it was only metadata, or our own
                # earlier try of this request, the next round sees it; else it conflicts.
                attempt = None
                refreshed = yield from _refresh(log, cursor, len(frame))
                if not log.seen.unseen(refreshed.incarnation, records, log.session_id):
                    return refreshed
                if refreshed.incarnation == cursor.incarnation and (
                    refreshed.total == cursor.total and refreshed.segment == cursor.segment
                ):
                    continue
                raise AppendConflict(log.session_id, after) from None
            except SegmentFull:
                attempt = None
                continue
            except BlobMissing:
                attempt = None
                continue  # deleted meanwhile: look again (an empty session, or none)
            return _appended(
                log, cursor, frame=frame, fresh=fresh, digest=digest, appended=appended
            )
    except OutcomeUnknown as unknown:
        raise Unsettled(cursor, attempt) from unknown


def delete(log: Log) -> Step[None]:
    """Delete every blob of the session: newest segment first, then oversized batches."""
    try:
        names = yield from list_names(log.folder_path + "/")
    except ContainerMissing:
        return
    if log.shared_folder:
        names = [name for name in names if is_session_blob(log.folder_path, name)]
    numbered = [(segment_number(name), name) for name in names]
    segments = sorted(
        ((number, name) for number, name in numbered if number is not None), reverse=True
    )
    others = [name for number, name in numbered if number is None]
    for name in [name for _, name in segments] + others:
        with contextlib.suppress(BlobMissing):
            yield Delete(name)
