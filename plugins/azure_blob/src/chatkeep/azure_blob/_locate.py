"""Finding the end of a session: its last segment and that segment's last bytes.

With a current cursor this is one ranged download around the known end. Without one it
starts at segment 0, jumps to the last segment named in segment 0's metadata (a hint kept
when segments roll) and follows ROLL frames forward from there.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import frames as fmt
from ._operations import Blob, BlobMissing, ContainerMissing, Step, get
from ._state import (
    META_BASE,
    META_INCARNATION,
    META_LAST,
    META_PREVIOUS,
    Cursor,
    Log,
    Restart,
    meta,
    meta_int,
)
from .frames import Frame, FrameError

__all__ = ["DamagedEnd", "Tail", "last_frame", "load_tail", "locate"]


class DamagedEnd(FrameError):
    """The last frame of the session's last segment is damaged: ``segment`` and a window
    ``blob`` ending at the segment's end say where (a writer can salvage the end)."""

    def __init__(self, damaged: FrameError, segment: int, blob: Blob) -> None:
        super().__init__(damaged.offset, damaged.reason, damaged.position)
        self.segment = segment
        self.blob = blob


def load_tail(log: Log, segment: int, guess: int | None, want: int) -> Step[Blob]:
    """At least the last ``want`` bytes of ``segment`` (all of it if smaller): one request
    when ``guess`` (its last known length) is still right or the segment is small."""
    name = log.segment(segment)
    slack = log.limits.probe  # room for what others appended since the guess
    if guess is None:
        blob = yield from get(name, 0, want)
    else:
        offset = max(0, guess - want)
        blob = yield from get(name, offset, guess - offset + slack)
    for _ in range(8):
        enough = blob.offset == 0 or blob.size - blob.offset >= want
        if blob.reaches_end and enough:
            return blob
        # The segment grew past the window (or shrank below it): fetch its real tail.
        offset = max(0, blob.size - want)
        blob = yield from get(name, offset, blob.size - offset + slack)
    raise Restart


def last_frame(log: Log, segment: int, blob: Blob) -> Step[tuple[Frame | None, Blob]]:
    """The segment's last frame (``None`` if it is empty) and a window holding it, fetching
    more bytes if ``blob`` cut the frame. Raises :class:`Restart` if the segment changed."""
    if blob.size == 0:
        return None, blob
    for _ in range(3):
        scan = fmt.scan_backward(blob.data, blob.offset, blob.size, floor=blob.size - 1)
        if scan.frames:
            return scan.frames[0], blob
        assert scan.wanted is not None
        start = max(0, scan.wanted)
        wider = yield from get(log.segment(segment), start, blob.size - start)
        if wider.size != blob.size or wider.etag != blob.etag:
            raise Restart
        blob = wider
    raise FrameError(blob.size, "cannot find the segment's last frame")


@dataclass(frozen=True)
class Tail:
    """The end of a session: its last segment, a window ending at that segment's end, the
    last frame (``None`` if the segment is empty) and the session's incarnation."""

    segment: int
    blob: Blob
    last: Frame | None
    incarnation: str

    @property
    def total(self) -> int:
        """Records in the session."""
        if self.last is not None:
            return self.last.total
        return meta_int(self.blob.metadata, META_BASE) or 0

    @property
    def rolled(self) -> bool:
        """Whether the segment ends with a ROLL frame (the next one is not created yet)."""
        return self.last is not None and self.last.kind == fmt.KIND_ROLL

    def cursor(self, record_bytes: int) -> Cursor:
        """A cursor at this end."""
        return Cursor(
            incarnation=self.incarnation,
            segment=self.segment,
            length=self.blob.size,
            total=self.total,
            blocks=self.blob.blocks,
            etag=self.blob.etag,
            previous=meta_int(self.blob.metadata, META_PREVIOUS),
            record_bytes=record_bytes,
        )

    def frames(self) -> list[Frame]:
        """The whole frames in the window, newest first (stopping before a damaged one)."""
        blob = self.blob
        return fmt.scan_backward(blob.data, blob.offset, blob.size, lenient=True).frames


def _life(blob: Blob) -> str:
    return meta(blob.metadata, META_INCARNATION) or ""


def locate(log: Log, cursor: Cursor | None, want: int) -> Step[Tail | None]:
    """The end of the session (with at least ``want`` bytes of its last segment, when it
    has them), or ``None`` if the session does not exist."""
    known = cursor is not None and not cursor.absent
    segment = cursor.segment if cursor is not None and known else 0
    guess = cursor.length if cursor is not None and known else None
    incarnation = cursor.incarnation if cursor is not None and known else None
    use_hint = not known
    blob: Blob | None = None
    for _ in range(10_000):
        if blob is None:
            try:
                blob = yield from load_tail(log, segment, guess, want)
            except BlobMissing as missing:
                if segment == 0 or isinstance(missing, ContainerMissing):
                    return None
                # A stale cursor or hint (the session was deleted, or the hint ran ahead):
                # walk from the start, following ROLL frames only.
                segment, guess, incarnation, use_hint = 0, None, None, False
                continue
        life = _life(blob)
        if incarnation is not None and life != incarnation and segment != 0:
            segment, guess, incarnation, use_hint, blob = 0, None, None, True, None
            continue
        incarnation = life
        if use_hint and segment == 0:
            use_hint = False
            hint = meta_int(blob.metadata, META_LAST)
            if hint:
                segment, guess, blob = hint, None, None
                continue
        try:
            last, blob = yield from last_frame(log, segment, blob)
        except Restart:
            guess, blob = None, None
            continue
        except DamagedEnd:
            raise
        except FrameError as damaged:
            raise DamagedEnd(damaged, segment, blob) from None
        if last is None or last.kind != fmt.KIND_ROLL:
            return Tail(segment, blob, last, life)
        following = fmt.decode_roll(last.body, last.start)
        try:
            after = yield from load_tail(log, following, None, want)
        except BlobMissing:
            return Tail(segment, blob, last, life)  # the next segment is not created yet
        if _life(after) != life:
            return Tail(segment, blob, last, life)
        segment, blob = following, after
    raise FrameError(0, "too many segments to follow")
