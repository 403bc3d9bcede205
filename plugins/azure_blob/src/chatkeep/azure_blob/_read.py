"""Reading a session log, written once for sync and async.

* ``start >= 0`` and ``stop >= 0`` (or ``None``): read forward from the first segment, in
  windows that double, up to ``stop`` records; a full read downloads whole segments.
* Otherwise the slice is counted from the end: find the end (one ranged download with a
  current cursor), take the session's length from the last frame's trailer, and walk
  frames backwards only as far as the slice needs. A tail read of ``k`` records costs in
  proportion to ``k``, not to the session's length.
"""

from __future__ import annotations

import itertools
import zlib

from chatkeep.core import Record

from . import frames as fmt
from ._locate import DamagedEnd, Tail, locate
from ._operations import BlobMissing, Sleep, Step, get
from ._state import (
    ABSENT,
    DEFAULT_RECORD_BYTES,
    META_INCARNATION,
    META_PREVIOUS,
    Cursor,
    Log,
    Restart,
    meta,
    meta_int,
)
from .frames import Frame, FrameError

__all__ = ["read"]


def read(
    log: Log, cursor: Cursor | None, start: int, stop: int | None
) -> Step[tuple[list[Record], Cursor | None]]:
    """``log[start:stop]`` and the cursor learned on the way (:data:`ABSENT` when the
    session does not exist, ``None`` when nothing was learned)."""
    for attempt in range(5):
        try:
            if start >= 0 and (stop is None or stop >= 0):
                if stop is not None and stop <= start:
                    return [], cursor
                return (yield from _read_forward(log, cursor, start, stop))
            return (yield from _read_backward(log, cursor, start, stop))
        except Restart:
            cursor = None
            if attempt:
                yield Sleep(0.01 * attempt)
    raise FrameError(0, "the session kept changing shape during the read")


def _estimate(count: int, record_bytes: int, log: Log) -> int:
    """Bytes to fetch for ``count`` records (with a margin), within the window limits."""
    limits = log.limits
    return min(limits.max_get, max(limits.probe, count * record_bytes * 5 // 4 + 256))


def _record_bytes(found: list[Frame], default: int) -> int:
    """Observed bytes per record in RECORDS frames, for the next estimate."""
    size = count = 0
    for frame in found:
        if frame.kind == fmt.KIND_RECORDS:
            size += frame.end - frame.start
            count += frame.records
    return max(1, size // count) if count else default


def _read_backward(
    log: Log, cursor: Cursor | None, start: int, stop: int | None
) -> Step[tuple[list[Record], Cursor | None]]:
    record_bytes = cursor.record_bytes if cursor is not None else DEFAULT_RECORD_BYTES
    wanted = -start if start < 0 else 64
    try:
        tail = yield from locate(log, cursor, _estimate(wanted, record_bytes, log))
        if tail is None:
            return [], ABSENT
        first, last, _ = slice(start, stop).indices(tail.total)
        if last <= first:
            _learn(log, tail, [], cursor)
            return [], tail.cursor(record_bytes)
        found = yield from _collect_backward(log, tail, first, record_bytes)
    except FrameError as damaged:
        if damaged.position is not None and not isinstance(damaged, DamagedEnd):
            raise
        # Walking backwards, the damage shows as the end of a frame that is not one; where
        # its records start is only known from the front. Read forward to report the first
        # damaged position exactly (costs a full read, only on a damaged session).
        yield from _read_forward(log, None, 0, None)
        raise FrameError(damaged.offset, damaged.reason, damaged.position) from None
    records = yield from _materialize(log, found, first, last)
    _learn(log, tail, records, cursor)
    return records, tail.cursor(_record_bytes(found, record_bytes))


def _learn(log: Log, tail: Tail, records: list[Record], cursor: Cursor | None) -> None:
    """Remember the ids a read came across: the records it returns, and every frame appended
    since the handle last looked (so a retry of one of those is recognised)."""
    log.seen.learn(
        tail.incarnation, ((record.id, fmt.data_digest(record.data)) for record in records)
    )
    known = cursor is not None and not cursor.absent and cursor.incarnation == tail.incarnation
    same_segment = known and cursor is not None and cursor.segment == tail.segment
    since = cursor.length if same_segment and cursor is not None else 0
    blob = tail.blob
    if since >= blob.size:
        return  # nothing new since the handle last looked: the common case of a turn
    floor = max(since, blob.offset)
    newer = fmt.scan_backward(blob.data, blob.offset, blob.size, floor=floor, lenient=True)
    log.seen.learn_frames(tail.incarnation, newer.frames)


def _collect_backward(log: Log, tail: Tail, first: int, record_bytes: int) -> Step[list[Frame]]:
    """Frames (oldest first) from the session's end back to the one holding record
    ``first``."""
    segment = tail.segment
    window, window_start, end = tail.blob.data, tail.blob.offset, tail.blob.size
    metadata = tail.blob.metadata
    newest_first: list[Frame] = []
    grow = 0
    while True:
        scan = fmt.scan_backward(window, window_start, end, first=first)
        checked = max(0, len(newest_first) - 1)  # the pairs before it are checked already
        newest_first.extend(scan.frames)
        _check_contiguous(newest_first[checked:])
        if newest_first and newest_first[-1].first <= first:
            break
        remaining = (newest_first[-1].first if newest_first else tail.total) - first
        amount = _estimate(remaining, record_bytes, log)
        if scan.wanted is None:  # reached the start of this segment: go to the previous
            if segment == 0:
                break
            previous = meta_int(metadata, META_PREVIOUS)
            if previous is None:
                raise FrameError(0, f"segment {segment} does not say where the previous ends")
            segment, end, grow = segment - 1, previous, amount
            offset = max(0, previous - amount)
            try:
                blob = yield from get(log.segment(segment), offset, previous - offset)
            except BlobMissing:
                raise FrameError(0, f"segment {segment} is missing", position=first) from None
            if len(blob.data) != previous - offset:
                raise Restart
            window, window_start, metadata = blob.data, offset, blob.metadata
            continue
        # Fetch the bytes before the window: at least the cut frame, growing geometrically.
        amount = max(window_start - scan.wanted, amount, grow * 2)
        offset = max(0, min(scan.wanted, window_start - amount))
        blob = yield from get(log.segment(segment), offset, window_start - offset)
        if len(blob.data) != window_start - offset:
            raise Restart
        window = blob.data + window[: scan.reached - window_start]
        window_start, end, grow = offset, scan.reached, amount
    newest_first.reverse()
    return newest_first


def _read_forward(
    log: Log, cursor: Cursor | None, start: int, stop: int | None
) -> Step[tuple[list[Record], Cursor | None]]:
    record_bytes = cursor.record_bytes if cursor is not None else DEFAULT_RECORD_BYTES
    limits = log.limits
    chunk = limits.max_get if stop is None else _estimate(stop, record_bytes, log)
    segment, offset, carry = 0, 0, b""
    found: list[Frame] = []
    incarnation: str | None = None
    final: Tail | None = None
    segment_last: Frame | None = None  # the last frame seen in the current segment
    expected = 0  # the position the next frame must start at
    while True:
        try:
            blob = yield from get(log.segment(segment), offset, chunk)
        except BlobMissing:
            if segment == 0 and offset == 0:
                return [], ABSENT
            if offset == 0:
                break  # rolled, and the next segment is not created yet
            raise Restart from None
        life = meta(blob.metadata, META_INCARNATION) or ""
        if incarnation is None:
            incarnation = life
        elif life != incarnation or blob.offset > blob.size:
            raise Restart
        window = carry + blob.data
        window_start = blob.offset - len(carry)
        scan = fmt.scan_forward(window, window_start, window_start, lenient=True)
        taken = len(found)
        expected = _take_forward(
            scan, window, window_start, expected=expected, stop=stop, found=found
        )
        _feed_index(log, incarnation, segment, found[taken:])
        segment_last = scan.frames[-1] if scan.frames else segment_last
        if stop is not None and found and found[-1].total >= stop:
            break
        if segment_last is not None and segment_last.kind == fmt.KIND_ROLL:
            segment, offset, carry = fmt.decode_roll(segment_last.body), 0, b""
            segment_last = None
            continue
        if blob.reaches_end:
            if scan.wanted is not None:
                reason = "the segment ends inside a frame"
                raise FrameError(scan.reached, reason, position=expected)
            final = Tail(segment, blob, segment_last, life)
            break
        carry = window[scan.reached - window_start :]
        offset = blob.end
        chunk = min(limits.max_get, chunk * 2)
    total = found[-1].total if found else 0
    first, last_index, _ = slice(start, stop).indices(total)
    records = yield from _materialize(log, found, first, last_index)
    if incarnation is not None:
        log.seen.learn_frames(incarnation, found)
    if final is None:
        return records, cursor
    return records, final.cursor(_record_bytes(found, record_bytes))


def _feed_index(log: Log, incarnation: str, segment: int, new: list[Frame]) -> None:
    """A read from the start feeds the id index for free (a later append skips reading)."""
    if log.index is not None and new:
        log.index.position(incarnation)
        log.index.advance(incarnation, segment, new[0].start, new, new[-1].end)


def _take_forward(
    scan: fmt.Scan,
    window: bytes,
    window_start: int,
    *,
    expected: int,
    stop: int | None,
    found: list[Frame],
) -> int:
    """Add the frames of a forward ``scan`` to ``found`` up to ``stop`` records, checking
    that each starts where the previous ended (``expected``); return the new ``expected``.
    Raises :class:`FrameError` naming the first damaged or missing position."""
    for frame in scan.frames:
        if stop is not None and expected >= stop:
            return expected  # the slice is complete: what lies beyond is not checked
        if frame.first != expected:  # a frame is missing: its records are lost
            reason = f"records {expected} to {frame.first - 1} are missing"
            raise FrameError(frame.start, reason, position=expected)
        expected = frame.total
        found.append(frame)
    damaged = scan.wanted is None and scan.reached < window_start + len(window)
    if damaged and (stop is None or expected < stop):
        _raise_damaged(window, window_start, scan.reached, expected)
    return expected


def _raise_damaged(window: bytes, window_start: int, at: int, position: int) -> None:
    """Raise the :class:`FrameError` of the damaged frame at segment offset ``at``, which
    should hold record ``position``."""
    try:
        fmt.scan_forward(window, window_start, at)
    except FrameError as damaged:
        raise FrameError(damaged.offset, damaged.reason, position=position) from None
    raise FrameError(at, "a damaged frame", position=position)


def _check_contiguous(newest_first: list[Frame]) -> None:
    """Raise :class:`FrameError` if a frame is missing between two frames walked backwards
    (each frame's running total must be where the next one's records start)."""
    for newer, older in itertools.pairwise(newest_first):
        if older.total != newer.first:
            reason = f"records {older.total} to {newer.first - 1} are missing"
            raise FrameError(newer.start, reason, position=older.total)


def _materialize(log: Log, found: list[Frame], first: int, last: int) -> Step[list[Record]]:
    """The records at log positions ``[first, last)`` of ``found`` (oldest first)."""
    out: list[Record] = []
    for frame in found:
        if frame.records == 0 or frame.total <= first or frame.first >= last:
            continue
        if frame.kind == fmt.KIND_RECORDS:
            try:
                records = fmt.decode_records(frame.body, frame.records, frame.start)
            except FrameError as exc:
                raise FrameError(exc.offset, exc.reason, position=frame.first) from None
        else:
            records = yield from _load_pointer(log, frame)
        low = max(first - frame.first, 0)
        high = min(last, frame.total) - frame.first
        out.extend(records[low:high] if low or high < frame.records else records)
    return out


def _load_pointer(log: Log, frame: Frame) -> Step[list[Record]]:
    """The records of an oversized batch, from the block blob its POINTER frame names."""
    pointer = fmt.decode_pointer(frame.body, frame.start)
    parts: list[bytes] = []
    offset = 0
    while offset < pointer.size:
        length = min(log.limits.max_get, pointer.size - offset)
        try:
            blob = yield from get(log.pointer(pointer.token), offset, length)
        except BlobMissing:
            reason = "the blob holding this oversized batch is missing"
            raise FrameError(frame.start, reason, frame.first) from None
        if not blob.data:
            break
        parts.append(blob.data)
        offset += len(blob.data)
    body = b"".join(parts)
    if len(body) != pointer.size or zlib.crc32(body) != pointer.crc:
        raise FrameError(frame.start, "the oversized batch's blob is damaged", frame.first)
    return fmt.decode_records(body, frame.records, frame.start)
