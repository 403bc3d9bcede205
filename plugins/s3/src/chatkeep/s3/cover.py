"""Which objects hold which records: pure functions over a listing, no I/O.

A session folder holds segments (one per append, key = start position), chunks written by
compaction (key = the range they cover) and zero-byte guards (segments whose records a
chunk now holds). Several objects may hold the same position: a chunk and the segments it
consolidated, or two overlapping chunks. Every object that holds a position holds the same
record there, so a reader may use any of them; :func:`cover` picks, at each position, the
object reaching farthest, which yields each record exactly once with the fewest objects.

A listing shows every object's start, but a segment's end only as the next segment's start;
the last segment's end is unknown until it is read (its header counts its records).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

__all__ = [
    "Entry",
    "Piece",
    "Span",
    "cover",
    "log_end",
    "overlapping",
    "pieces",
    "speculative_window",
    "window",
    "with_end",
]


@dataclass(frozen=True, slots=True)
class Entry:
    """One listed object of a session folder."""

    key: str
    etag: str
    size: int
    start: int
    #: Exclusive end position when known: from the key for chunks, from the header (or our
    #: own write) for segments; ``None`` for a segment not read yet.
    end: int | None = None
    chunk: bool = False

    @property
    def key_etag(self) -> tuple[str, str]:
        """``(key, etag)``: names this version of the object."""
        return (self.key, self.etag)

    @property
    def guard(self) -> bool:
        """A zero-byte segment left by compaction: it claims a position but holds nothing."""
        return not self.chunk and self.size == 0


@dataclass(frozen=True, slots=True)
class Piece:
    """An object that holds records, with the range it holds."""

    entry: Entry
    start: int
    #: Exclusive end; ``None`` only for the last segment while it is unread.
    end: int | None
    #: Whether ``end`` is certain (key or header) rather than inferred from the next key.
    exact: bool

    @property
    def key(self) -> str:
        """The object's key."""
        return self.entry.key


@dataclass(frozen=True, slots=True)
class Span:
    """The part ``[lo, hi)`` of a piece a reader takes (``hi`` ``None``: to its unknown end)."""

    piece: Piece
    lo: int
    hi: int | None


def pieces(segments: Sequence[Entry], chunks: Sequence[Entry]) -> list[Piece]:
    """The record-holding objects of a listing, sorted by start.

    ``segments`` must be sorted by start and include guards: a guard still marks where the
    segment before it ends.
    """
    found: list[Piece] = []
    for index, entry in enumerate(segments):
        if entry.guard:
            continue
        if entry.end is not None:
            found.append(Piece(entry, entry.start, entry.end, exact=True))
        elif index + 1 < len(segments):
            found.append(Piece(entry, entry.start, segments[index + 1].start, exact=False))
        else:
            found.append(Piece(entry, entry.start, None, exact=False))
    found.extend(Piece(chunk, chunk.start, chunk.end, exact=True) for chunk in chunks)
    found.sort(key=lambda piece: piece.start)
    return found


def _reach(piece: Piece) -> float:
    return float("inf") if piece.end is None else piece.end


def cover(found: Sequence[Piece], *, skip_gaps: bool = False) -> list[Span] | None:
    """Greedy cover of the log: at each position, the piece reaching farthest.

    Starts at the lowest start (a lifecycle rule may have expired the oldest objects). A
    position no piece holds while later pieces exist is a gap; gaps only follow outside
    events (expiry, a delete racing a writer). Returns ``None`` on a gap unless
    ``skip_gaps``, in which case the cover resumes at the next piece.
    """
    ordered = sorted(found, key=lambda piece: piece.start)
    if not ordered:
        return []
    spans: list[Span] = []
    position = ordered[0].start
    index, best = 0, None
    while True:
        while index < len(ordered) and ordered[index].start <= position:
            if best is None or _reach(ordered[index]) > _reach(best):
                best = ordered[index]
            index += 1
        if best is None or _reach(best) <= position:
            if index >= len(ordered):
                return spans
            if not skip_gaps:
                return None
            position, best = ordered[index].start, None
            continue
        spans.append(Span(best, position, best.end))
        if best.end is None:
            return spans
        position = best.end


def log_end(spans: Sequence[Span]) -> int | None:
    """The position after the last record (``None`` while the last segment is unread)."""
    return spans[-1].hi if spans else 0


def window(spans: Sequence[Span], start: int, stop: int | None) -> tuple[int, int]:
    """The positions ``[lo, hi)`` that ``log[start:stop]`` returns, once the end is known.

    Positions count from the first span's start, the log's origin.
    """
    origin, end = spans[0].lo, spans[-1].hi
    assert end is not None, "window() needs a known end"
    first, last, _ = slice(start, stop).indices(end - origin)
    return origin + first, origin + max(first, last)


def speculative_window(spans: Sequence[Span], start: int, stop: int | None) -> tuple[int, float]:
    """Bounds ``[lo, hi)`` holding ``log[start:stop]`` for any length the log may have.

    While the last segment is unread, the log has at least one record in it, so the length
    is at least ``last.lo + 1 - origin``. Reading every piece that overlaps these bounds (and
    the last one) answers the read in one round of parallel GETs.
    """
    origin = spans[0].lo
    shortest = spans[-1].lo + 1 - origin
    low = start if start >= 0 else max(0, shortest + start)
    high: float = stop if stop is not None and stop >= 0 else float("inf")
    return origin + low, origin + high


def overlapping(spans: Sequence[Span], lo: float, hi: float) -> list[int]:
    """Indexes of the spans holding any position in ``[lo, hi)``."""
    return [
        index
        for index, span in enumerate(spans)
        if span.lo < hi and (span.hi is None or span.hi > lo)
    ]


def with_end(spans: Sequence[Span], end: int) -> list[Span]:
    """``spans`` with the last one's unknown end filled in."""
    last = spans[-1]
    piece = replace(last.piece, end=end, exact=True)
    return [*spans[:-1], Span(piece, last.lo, end)]
