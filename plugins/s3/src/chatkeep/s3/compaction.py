"""Consolidating a session's small segments into chunks, safely at any moment.

Every append is its own object, so a long chat is many small objects, and a cold full read
is one GET per append. :func:`compact` merges runs of consecutive objects into chunks:

1. List the session and read its segments.
2. Write each chunk under ``cmp/<start>-<end>`` with ``If-None-Match: *``. Readers now find
   two copies of those positions and take the chunk (it reaches farther); nothing changes
   for them otherwise.
3. Overwrite each consolidated segment with zero bytes (``If-Match`` its ETag), a *guard*:
   its storage is returned, while its key keeps its position claimed. Deleting it instead
   would let a writer whose idea of the end is stale create that key again and be told it
   succeeded while readers ignore it, a lost append.
4. Delete older chunks that a new chunk contains.

A crash (or an error) between any two steps leaves a log that reads the same, each record
once: before step 2 nothing changed; after it, every position is held by the chunk and
perhaps also by its old segment, and readers take one. Running ``compact`` again finishes
the job. Compaction running alongside appends, reads and other compactions is safe; alongside
``delete`` of the same session it may bring back what the delete erased.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from chatkeep.core import Record, StoreUnavailable

from . import segments
from .bucket import Conflict, UnknownOutcome
from .cover import Entry, Piece, Span, cover, pieces
from .keys import Layout
from .segments import Loaded

if TYPE_CHECKING:
    from .store import S3Store

__all__ = ["CompactionResult", "compact"]

#: Default largest chunk, in records and in bytes of record data.
MAX_CHUNK_RECORDS = 10_000
MAX_CHUNK_BYTES = 8 * 1024 * 1024


@dataclass(frozen=True)
class CompactionResult:
    """What one :func:`compact` call did."""

    chunks_written: int = 0
    records_compacted: int = 0
    segments_guarded: int = 0
    chunks_deleted: int = 0


def compact(
    store: S3Store,
    session_id: str,
    *,
    max_chunk_records: int = MAX_CHUNK_RECORDS,
    max_chunk_bytes: int = MAX_CHUNK_BYTES,
) -> CompactionResult:
    """Merge runs of the session's consecutive segments (and small chunks) into chunks of
    at most ``max_chunk_records`` records and ``max_chunk_bytes`` bytes.

    Costs one LIST, a GET per segment not cached, a PUT per chunk and per consolidated
    segment (its guard), and one ``DeleteObjects`` for superseded chunks.
    """
    if max_chunk_records < 2 or max_chunk_bytes < 1:
        raise ValueError("max_chunk_records must be at least 2 and max_chunk_bytes positive")
    view = store.view_for(session_id)
    with view.lock:
        store.list_all(view, complete=True)  # every segment, to guard any left unguarded
        listed, chunks = list(view.segments), list(view.chunks)
    # Segments are read in full: merging needs their data, and their headers give the
    # exact ends a listing only infers.
    found = pieces(listed, [])
    loaded = store.fetch_many(session_id, [(piece.entry, None) for piece in found])
    exact = [Piece(p.entry, p.start, loaded[p.key].header.end, exact=True) for p in found]
    exact.extend(Piece(chunk, chunk.start, chunk.end, exact=True) for chunk in chunks)
    runs = _runs(cover(exact, skip_gaps=True) or [], max_chunk_records, max_chunk_bytes)
    if not runs:
        return CompactionResult()

    written: list[tuple[int, int]] = []
    records_compacted = 0
    for run in runs:
        lo, hi = run[0].lo, run[-1].hi
        assert hi is not None
        records = _records_of(store, session_id, run, loaded)
        key = Layout.chunk_key(view.folder, lo, hi)
        try:
            etag = store.bucket.create(key, segments.encode(lo, records))
        except Conflict:
            pass  # another compaction wrote this very range: the same records
        except UnknownOutcome as exc:
            raise StoreUnavailable(
                f"compaction of session {session_id!r} could not write a chunk ({exc}); "
                "the log is intact, run compact again"
            ) from exc
        else:
            with view.lock:  # the ids now live in the chunk (their segments become guards)
                view.ids.update(dict.fromkeys((record.id for record in records), (key, etag)))
        written.append((lo, hi))
        records_compacted += hi - lo

    guarded = _guard(store, listed, loaded, written)

    doomed = [
        chunk.key
        for chunk in chunks
        if any(
            lo <= chunk.start and (chunk.end or 0) <= hi and (chunk.start, chunk.end) != (lo, hi)
            for lo, hi in written
        )
    ]
    if doomed:
        store.bucket.delete(doomed)
    with view.lock:
        view.listed = False  # the next call lists the folder afresh
    return CompactionResult(
        chunks_written=len(written),
        records_compacted=records_compacted,
        segments_guarded=guarded,
        chunks_deleted=len(doomed),
    )


def _runs(spans: list[Span], max_records: int, max_bytes: int) -> list[list[Span]]:
    """Group consecutive spans into runs within the limits; keep runs of two or more."""
    runs: list[list[Span]] = []
    current: list[Span] = []
    count = size = 0
    for span in spans:
        assert span.hi is not None
        length = span.hi - span.lo
        entry = span.piece.entry
        # Bytes of this span, pro rata if only part of the object is used.
        whole = (span.piece.end or span.hi) - span.piece.start
        weight = entry.size * length // max(whole, 1)
        joins = (
            current
            and current[-1].hi == span.lo
            and count + length <= max_records
            and size + weight <= max_bytes
        )
        if not joins:
            if len(current) >= 2:
                runs.append(current)
            current, count, size = [], 0, 0
        current.append(span)
        count += length
        size += weight
    if len(current) >= 2:
        runs.append(current)
    return runs


def _records_of(
    store: S3Store, session_id: str, run: list[Span], loaded: dict[str, Loaded]
) -> list[Record]:
    out: list[Record] = []
    for span in run:
        got = loaded.get(span.piece.key)
        if got is None:  # a chunk being merged into a bigger one
            got = loaded[span.piece.key] = store.fetch(session_id, span.piece.entry)
        assert span.hi is not None
        out.extend(got.between(span.lo, span.hi))
    return out


def _guard(
    store: S3Store, listed: list[Entry], loaded: dict[str, Loaded], written: list[tuple[int, int]]
) -> int:
    """Turn every segment inside a written chunk into a zero-byte guard."""
    targets = []
    for entry in listed:
        if entry.guard or entry.key not in loaded:
            continue
        end = loaded[entry.key].header.end
        if any(lo <= entry.start and end <= hi for lo, hi in written):
            targets.append(entry)
    if not targets:
        return 0
    try:
        results = list(
            store.executor().map(lambda e: store.bucket.replace(e.key, b"", e.etag), targets)
        )
    except NotImplementedError:
        # The store cannot overwrite conditionally: leave the segments; readers skip them.
        return 0
    return sum(results)
