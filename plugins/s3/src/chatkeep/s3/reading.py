"""Reading ``log[start:stop]``: one listing, then the objects that hold the slice.

A listing of a session's log comes back newest first, so the objects holding the last *k*
records are in its first page however long the session is. It stops at the first table
of contents, whose pieces (chunks, or segments left in place) hold every position before
its end. The newest segment's length is only known once it is read, so a tail read fetches
everything the answer could need in one round of parallel GETs.

Every position the slice needs must be held by something: a position no segment or piece
holds is damage (an object removed behind the store's back), reported as
:class:`~chatkeep.core.errors.CorruptRecord` with its position, never skipped. A chunk that
is gone or unreadable is only a lost copy: those positions are read from their segments.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from chatkeep.core.backend import CorruptRecord, Record, StoreUnavailable

from . import frames
from .catalog import Catalog, Entry, Gone, Loaded, Scan
from .contents import Contents, Piece
from .folder import SessionFolder, Tip

__all__ = ["Observed", "Reader"]

_ATTEMPTS = 5
_MISSING = "the object holding this position is missing"


@dataclass(slots=True)
class Observed:
    """What a read saw of the session's newest state (the appender learns from it)."""

    #: Whether the listing started at the newest key.
    from_top: bool = False
    empty: bool = False
    top: Entry | None = None
    top_header: frames.Header | None = None
    contents: tuple[Entry, Contents] | None = None
    #: The listing, if it started at the newest key.
    scan: Scan | None = None


class Reader:
    """Reads slices of session logs for one store."""

    def __init__(self, catalog: Catalog, where: str, page: int) -> None:
        self.catalog = catalog
        self.where = where
        #: Keys in the first page of a listing that must reach a table of contents.
        self.page = page

    def read(
        self, session_id: str, folder: SessionFolder, start: int, stop: int | None
    ) -> tuple[list[Record], Observed]:
        """``log[start:stop]`` and what the read saw."""
        if start >= 0 and stop is not None and 0 <= stop <= start:
            return [], Observed()
        for _ in range(_ATTEMPTS):
            try:
                return self._read(session_id, folder.folder, start, stop, folder.listing)
            except Gone:
                continue  # an object changed between listing and reading: list again
        raise StoreUnavailable(
            f"session {session_id!r} kept changing while being read from {self.where}; try again"
        )

    # -- one attempt ----------------------------------------------------------------------

    def _read(
        self, session_id: str, folder: str, start: int, stop: int | None, known: Scan | None
    ) -> tuple[list[Record], Observed]:
        bounded = start >= 0 and stop is not None and stop >= 0
        scan = self._scan(folder, start, stop if bounded else None, known)
        observed = Observed(from_top=not bounded, scan=None if bounded else scan)
        toc = scan.contents[0] if scan.contents else None
        floor = (toc.end or 0) if toc is not None else 0
        segments = [entry for entry in reversed(scan.segments) if entry.start >= floor]
        if not segments and toc is None:
            if bounded:
                self._bounded_end(session_id, folder, None, start)
            else:
                observed.empty = scan.bottom
            return [], observed
        # One round of GETs: the segments the slice may need, and the newest one (for the
        # log's end, unknown until it is read).
        low = start if bounded else _lowest_needed(scan, start)
        wanted = _overlapping(segments, low, stop if bounded else None)
        if not bounded and segments and segments[-1] not in wanted:
            wanted.append(segments[-1])
        loaded = self._fetch(session_id, wanted)
        lo, hi = self._window(
            session_id,
            folder,
            segments,
            loaded,
            floor=floor,
            start=start,
            stop=stop,
            observed=observed,
        )
        if lo >= hi:
            return [], observed
        out: list[Record] = []
        if lo < floor:
            assert toc is not None
            below = self._below_contents(session_id, folder, toc, lo, min(hi, floor))
            if below[1] is not None:
                observed.contents = (toc, below[1])
            out.extend(below[0])
        if hi > floor:
            out.extend(self._from_segments(session_id, segments, loaded, max(lo, floor), hi))
        return out, observed

    def _scan(self, folder: str, start: int, stop: int | None, known: Scan | None) -> Scan:
        """List newest first (from ``stop`` down, for a slice with both bounds) until the
        listing holds what ``log[start:stop]`` can need."""
        if stop is not None:
            return self.catalog.scan(
                folder,
                below=stop,
                page=min(1000, stop - start + 3),
                enough=lambda s: _covered(s, start),
            )
        page = min(1000, max(3 - start, 8) if start < 0 else self.page)
        return self.catalog.scan(
            folder,
            page=page,
            enough=lambda s: _covered(s, _lowest_needed(s, start)),
            known=known,
        )

    def _window(
        self,
        session_id: str,
        folder: str,
        segments: Sequence[Entry],
        loaded: dict[str, Loaded],
        *,
        floor: int,
        start: int,
        stop: int | None,
        observed: Observed,
    ) -> tuple[int, int]:
        """The absolute positions ``[lo, hi)`` of ``log[start:stop]``."""
        top = segments[-1] if segments else None
        top_loaded = loaded.get(top.key) if top is not None else None
        top_end = top_loaded.header.end if top_loaded is not None else None
        if observed.from_top:
            if top is not None and top_loaded is not None:
                observed.top, observed.top_header = top, top_loaded.header
            end = max(top_end if top_end is not None else floor, floor)
            lo, hi, _ = slice(start, stop).indices(end)
            return lo, hi
        assert stop is not None
        if top is None:
            return start, min(stop, floor)
        if top_end is not None and top_end < stop:
            return start, self._bounded_end(session_id, folder, top, top_end)
        return start, stop

    def _below_contents(
        self, session_id: str, folder: str, toc: Entry, lo: int, hi: int
    ) -> tuple[list[Record], Contents | None]:
        """Positions ``[lo, hi)`` below the table of contents ``toc``, and the table."""
        table = self.catalog.contents(session_id, toc)
        if table is None:
            # Unreadable: tables of contents are derived data, the segments hold the log.
            return self.segment_records(session_id, folder, lo, hi), None
        return self._from_pieces(session_id, folder, table.pieces, lo, hi), table

    def _bounded_end(self, session_id: str, folder: str, top: Entry | None, top_end: int) -> int:
        """A slice with a bound reaching past the segment it listed last (``top``, ending
        at ``top_end``): either the log ends there, or what holds the positions after it
        is missing (damage)."""
        scan = self.catalog.scan(folder, page=2, enough=lambda s: bool(s.segments))
        newest = scan.segments[0] if scan.segments else None
        above = [entry.end or 0 for entry in scan.contents if (entry.end or 0) > top_end]
        if (newest is not None and (top is None or newest.start > top.start)) or above:
            raise CorruptRecord(
                session_id, top_end, "the objects holding this position are missing"
            )
        return top_end

    def _fetch(self, session_id: str, entries: Sequence[Entry]) -> dict[str, Loaded]:
        results = self.catalog.fetch_many(session_id, [(entry, None) for entry in entries])
        loaded: dict[str, Loaded] = {}
        for key, result in results.items():
            if isinstance(result, BaseException):
                raise result
            loaded[key] = result
        return loaded

    # -- assembling ------------------------------------------------------------------------

    @staticmethod
    def _from_segments(
        session_id: str, segments: Sequence[Entry], loaded: dict[str, Loaded], lo: int, hi: int
    ) -> list[Record]:
        """Positions ``[lo, hi)`` from ``segments`` (ascending; each must start where the
        one before it ends, or the positions between are missing)."""
        out: list[Record] = []
        position = lo
        for index, entry in enumerate(segments):
            if position >= hi:
                break
            following = segments[index + 1].start if index + 1 < len(segments) else None
            got = loaded.get(entry.key)
            if got is None:
                if following is not None and following <= position:
                    continue  # wholly before the slice: not fetched
                if entry.start >= hi:
                    break
                raise Gone(entry.key)  # pragma: no cover - every needed one was fetched
            if entry.start > position:
                raise CorruptRecord(session_id, position, _MISSING)
            end = got.header.end
            if following is not None and end > following and following < hi:
                raise CorruptRecord(session_id, following, "two objects claim this position")
            if end > position:
                out.extend(got.between(position, min(end, hi)))
                position = min(end, hi)
        if position < hi:
            raise CorruptRecord(session_id, position, _MISSING)
        return out

    def _from_pieces(
        self, session_id: str, folder: str, pieces: Sequence[Piece], lo: int, hi: int
    ) -> list[Record]:
        """Positions ``[lo, hi)`` from a table of contents' pieces (segments where a chunk
        is lost)."""
        chosen = [p for p in pieces if p.start < hi and p.end > lo]
        entries = [(piece_entry(folder, p), max(lo, p.start)) for p in chosen]
        results = self.catalog.fetch_many(session_id, entries)
        out: list[Record] = []
        for piece, (entry, _) in zip(chosen, entries, strict=True):
            a, b = max(lo, piece.start), min(hi, piece.end)
            got = results.get(entry.key)
            if isinstance(got, Loaded) and got.start <= a and got.header.end == piece.end:
                out.extend(got.between(a, b))
            else:
                out.extend(self.segment_records(session_id, folder, a, b))
        return out

    def segment_records(self, session_id: str, folder: str, lo: int, hi: int) -> list[Record]:
        """Positions ``[lo, hi)`` read from their segments alone."""
        scan = self.catalog.scan(
            folder, below=hi, page=min(1000, hi - lo + 3), enough=lambda s: _segments_to(s, lo)
        )
        segments = list(reversed(scan.segments))
        loaded = self._fetch(session_id, _overlapping(segments, lo, hi))
        return self._from_segments(session_id, segments, loaded, lo, hi)


def piece_entry(folder: str, piece: Piece) -> Entry:
    """The catalog entry of a table of contents' piece (ETag unknown)."""
    kind = "chunk" if piece.key.startswith("chunk/") else "seg"
    return Entry(folder + piece.key, piece.etag, piece.size, kind, piece.start, piece.end)


def _overlapping(segments: Sequence[Entry], lo: int, hi: int | None) -> list[Entry]:
    """The ascending ``segments`` that may hold a position in ``[lo, hi)``: each one's end
    is the next one's start (the newest one's is unknown)."""
    out = []
    for index, entry in enumerate(segments):
        following = segments[index + 1].start if index + 1 < len(segments) else None
        if following is not None and following <= lo:
            continue
        if hi is not None and entry.start >= hi:
            break
        out.append(entry)
    return out


def _lowest_needed(scan: Scan, start: int) -> int:
    """The lowest position ``log[start:]`` can need, whatever the newest segment holds."""
    if start >= 0:
        return start
    if scan.segments:
        newest_start = scan.segments[0].start
        floor = scan.contents[0].end or 0 if scan.contents else 0
        if floor > newest_start:
            return max(0, floor + start)
        return max(0, newest_start + 1 + start)
    if scan.contents:
        return max(0, (scan.contents[0].end or 0) + start)
    return 0


def _covered(scan: Scan, low: int) -> bool:
    """Whether the listing so far reaches down to ``low`` (a table of contents covers
    everything below it)."""
    return bool(scan.contents) or _segments_to(scan, low)


def _segments_to(scan: Scan, low: int) -> bool:
    lowest = scan.lowest
    return lowest is not None and lowest <= low


def tip_of(observed: Observed) -> Tip | None:
    """The newest segment a read saw, if it read its header."""
    if observed.top is None or observed.top_header is None:
        return None
    return Tip(observed.top, observed.top_header)
