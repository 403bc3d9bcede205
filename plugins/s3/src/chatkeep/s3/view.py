"""What one store handle knows about one session, and which part of it a read needs.

A :class:`SessionView` is built from listings and from the handle's own writes; nothing
in it is authoritative (other processes write too), which is why every read starts with
a LIST and every append with a conditional PUT.
"""

from __future__ import annotations

import bisect
import threading
from dataclasses import dataclass, replace

from . import segments
from .cover import Entry
from .keys import Layout

__all__ = ["SessionView", "Snapshot", "coverage_key", "snapshot_for"]


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A session's listing as a read planned from it."""

    segments: list[Entry]
    chunks: list[Entry]


class SessionView:
    """What one store instance knows about one session's folder.

    ``segments`` is every segment key (guards included) in position order, as of the last
    listing plus this instance's own writes; ``ids`` maps record ids this instance has seen
    to the (key, ETag) that holds them, for skipping records already stored.
    """

    __slots__ = ("chunks", "folder", "ids", "listed", "lock", "named", "pending", "segments")

    def __init__(self, folder: str) -> None:
        self.folder = folder
        self.lock = threading.RLock()
        self.listed = False
        self.segments: list[Entry] = []
        self.chunks: list[Entry] = []
        self.ids: dict[str, tuple[str, str]] = {}
        #: Positions of writes whose outcome is unknown: checked before the next append.
        self.pending: set[int] = set()
        #: Whether the ``id`` object of a long session id is known to exist.
        self.named = False

    def end(self) -> int | None:
        """The position after the last record, or ``None`` while the last segment is unread."""
        chunk_end = max((chunk.end or 0 for chunk in self.chunks), default=0)
        if not self.segments:
            return chunk_end
        last = self.segments[-1]
        if last.end is not None:
            return max(chunk_end, last.end)
        if last.guard or chunk_end > last.start:
            # A guard's records live in a chunk; an uncovered guard (its chunk expired)
            # holds nothing, so the next free position is just past it.
            return max(chunk_end, last.start + 1)
        return None

    def learn(self, entry: Entry, header: segments.Header) -> None:
        """Record what reading ``entry`` taught: its exact end and its record ids."""
        if not entry.chunk:
            index = bisect.bisect_left(self.segments, entry.start, key=lambda e: e.start)
            if index < len(self.segments):
                known = self.segments[index]
                if known.key == entry.key and known.etag == entry.etag and known.end is None:
                    self.segments[index] = replace(known, end=header.end)
        location = (entry.key, entry.etag)
        for record_id in header.ids:
            self.ids[record_id] = location

    def insert(self, entry: Entry) -> None:
        """Add (or replace) the segment at ``entry.start``."""
        index = bisect.bisect_left(self.segments, entry.start, key=lambda e: e.start)
        if index < len(self.segments) and self.segments[index].start == entry.start:
            self.segments[index] = entry
        else:
            self.segments.insert(index, entry)


def snapshot_for(view: SessionView, start: int, stop: int | None) -> Snapshot:
    """What a read of ``log[start:stop]`` needs of the view (call with ``view.lock`` held).

    A tail read (negative ``start`` and ``stop``) needs only the objects from the one
    holding position ``last segment + 1 + start`` on, so it costs O(k), not O(log length),
    in CPU as well as in requests.
    """
    known = view.segments
    if start < 0 and (stop is None or stop < 0) and known and not known[-1].guard:
        # The log ends at or after the last segment's first record, so the answer starts
        # at or after `bound`.
        bound = known[-1].start + 1 + start
        index = bisect.bisect_right(known, bound, key=lambda entry: entry.start) - 1
        if index > 0:
            return Snapshot(
                known[index:], [chunk for chunk in view.chunks if (chunk.end or 0) > bound]
            )
    return Snapshot(list(known), list(view.chunks))


def coverage_key(folder: str, segs: list[Entry], chunks: list[Entry]) -> str | None:
    """The segment key just below the end of the chunks' contiguous coverage, if skipping
    to it is safe: no segment below the first chunk may be left out."""
    if not segs or not chunks:
        return None
    ordered = sorted(chunks, key=lambda chunk: chunk.start)
    if ordered[0].start > segs[0].start:
        return None
    covered = ordered[0].start
    for chunk in ordered:
        if chunk.start > covered:
            break
        covered = max(covered, chunk.end or 0)
    return Layout.segment_key(folder, covered - 1) if covered > 0 else None
