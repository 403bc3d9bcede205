"""Roll-over: the work that keeps every session cheap to open, folded into appends.

Every ``rollover_segments`` appends (16 by default), the writer whose append crossed the
mark also, in four more requests:

0. lists those segments (so it copies the log as it is now, never a cached object that was
   removed behind the store's back);
1. writes the chunks :func:`chatkeep.s3.contents.plan` asks for (``chunk/<start>-<end>``, created
   with ``If-None-Match: *``; a chunk's content is fixed by its range, so a writer that
   finds one already there uses it);
2. writes a table of contents for ``[0, end)`` at ``log/<inverted end>.toc``, also conditional:
   the end of each roll-over is fixed by the log (the end of the 16th segment after the
   last table of contents), so two writers racing write the same table and one wins;
3. removes, in one ``DeleteObjects``, the table and the chunks it replaced.

A crash between any two steps leaves the log as readable as before: segments are never
rewritten or removed, a chunk nobody lists is ignored, and the next roll-over finishes the
work. The cost is amortised: a quarter of a request per append, plus GETs of segments the
writer has not cached. :meth:`RollOver.compact` does the same at once up to the end.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from chatkeep.core.backend import Record
from chatkeep.core.errors import ChatkeepError

from . import frames
from .bucket import Bucket, Conflict, UnknownOutcome
from .catalog import Catalog, Entry, Gone, Loaded
from .contents import CompactionResult, Contents, ContentsError, Piece, Policy, Span, plan
from .folder import SessionFolder
from .layout import Layout
from .reading import Reader, piece_entry
from .recordids import Bloom

__all__ = ["CompactionResult", "RollOver"]

_log = logging.getLogger(__name__)
_STEPS = 4


class RollOver:
    """Writes chunks and tables of contents for one store."""

    def __init__(self, bucket: Bucket, catalog: Catalog, reader: Reader, default: Policy) -> None:
        self.bucket = bucket
        self.catalog = catalog
        self.reader = reader
        self.default = default

    def policy_of(self, folder: SessionFolder) -> Policy:
        """The session's policy (its table of contents'), or the store's for a new one."""
        return folder.contents[1].policy if folder.contents is not None else self.default

    def after_append(self, session_id: str, folder: SessionFolder) -> None:
        """Roll over while one is due (call with ``folder.lock`` held). Failures are only
        logged: the append has succeeded, and the next one tries again."""
        for _ in range(_STEPS):
            policy = self.policy_of(folder)
            segments = folder.recent().segments
            if len(segments) < policy.rollover:
                return
            try:
                done = self.roll(session_id, folder, segments[: policy.rollover], policy)
            except (ChatkeepError, Gone) as exc:
                _log.debug("roll-over of %r postponed: %s", session_id, exc)
                return
            if done is None:
                return

    def compact(
        self, session_id: str, folder: SessionFolder, max_records: int, max_bytes: int
    ) -> CompactionResult:
        """Roll everything up to the end over now (call with ``folder.lock`` held)."""
        total = CompactionResult()
        policy = self.policy_of(folder)
        policy = Policy(policy.rollover, max_records, max_bytes)
        segments = folder.recent().segments
        if not segments:
            return total
        result = self.roll(session_id, folder, segments, policy)
        return result if result is not None else total

    def roll(
        self,
        session_id: str,
        folder: SessionFolder,
        segments: Sequence[tuple[int, int]],
        policy: Policy,
    ) -> CompactionResult | None:
        """Write the table of contents that adds ``segments`` (``(start, count)``, from the
        current table's end) to the current one; ``None`` if it could not be done now."""
        tail = self._tail(session_id, folder, segments)
        if tail is None:
            return None
        previous = folder.contents
        old = {p.key: p for p in previous[1].pieces} if previous is not None else {}
        new = {entry.key[len(folder.folder) :]: (entry, loaded) for entry, loaded in tail}
        planned = plan(
            [Span(p.start, p.end, p.size, p.key) for p in old.values()],
            [Span(e.start, got.header.end, e.size, key) for key, (e, got) in new.items()],
            policy,
        )
        pieces: list[Piece] = []
        written = compacted = 0
        for span in planned:
            if span.key is not None:
                kept = old.get(span.key)
                if kept is None:
                    entry, got = new[span.key]
                    ids = (r.id for r in got.records)
                    kept = Piece(
                        span.start, span.end, span.size, span.key, Bloom.of(ids), entry.etag
                    )
                pieces.append(kept)
                continue
            chunk = self._write_chunk(session_id, folder, span, new)
            if chunk is None:
                return None
            pieces.append(chunk)
            written += 1
            compacted += span.count
        replaces: tuple[str, ...] = ()
        if previous is not None:
            listed = {p.key for p in pieces}
            replaces = (
                previous[0].key[len(folder.folder) :],
                *(
                    p.key
                    for p in previous[1].pieces
                    if p.key.startswith("chunk/") and p.key not in listed
                ),
            )
        last_id = tail[-1][1].header.ids[-1]
        table = Contents(planned[-1].end, policy, tuple(pieces), last_id, replaces)
        deleted = self._publish(session_id, folder, table, previous)
        return CompactionResult(written, compacted, deleted)

    def _tail(
        self, session_id: str, folder: SessionFolder, segments: Sequence[tuple[int, int]]
    ) -> list[tuple[Entry, Loaded]] | None:
        """The segments to roll over, as listed now (so one removed behind the store's back
        stays missing, never restored from a cache) and read (mostly from the cache);
        ``None`` if they are not the contiguous run the summary describes."""
        floor = folder.contents_end
        top = segments[-1][0]
        scan = self.catalog.scan(
            folder.folder,
            below=top,
            page=min(1000, top - floor + 3),
            enough=lambda s: s.lowest is not None and s.lowest <= floor,
        )
        listed = {entry.start: entry for entry in scan.segments}
        position = floor
        tail: list[tuple[Entry, Loaded]] = []
        for start, count in segments:
            entry = listed.get(start)
            if entry is None or start != position:
                return None
            loaded = self.catalog.fetch(session_id, entry)
            if loaded.header.end != start + count:
                return None
            tail.append((entry, loaded))
            position = start + count
        return tail or None

    def _write_chunk(
        self,
        session_id: str,
        folder: SessionFolder,
        span: Span,
        new: dict[str, tuple[Entry, Loaded]],
    ) -> Piece | None:
        """Create the chunk for ``span`` (or find it made by another writer)."""
        records: list[Record] = []
        for leaf in span.leaves():
            if leaf.key in new:
                records.extend(new[leaf.key][1].records)
            else:
                records.extend(self._records(session_id, folder, leaf))
        if len(records) != span.count:
            return None
        body = frames.encode(span.start, records)
        key = Layout.chunk_key(folder.folder, span.start, span.end)
        try:
            etag = self.bucket.create(key, body)
        except Conflict:
            # The same range, so the same records: another writer made it first.
            got = self.bucket.get(key, first=0, last=0)
            etag = got[1] if got is not None else ""
        except UnknownOutcome as exc:
            _log.debug("roll-over of %r postponed: chunk %s: %s", session_id, key, exc)
            return None
        else:
            header = frames.parse_header(body)
            assert isinstance(header, frames.Header)
            entry = Entry(key, etag, len(body), "chunk", span.start, span.end)
            self.catalog.remember(entry, header, records, len(body))
        ids = (r.id for r in records)
        return Piece(
            span.start, span.end, len(body), key[len(folder.folder) :], Bloom.of(ids), etag
        )

    def _publish(
        self,
        session_id: str,
        folder: SessionFolder,
        table: Contents,
        previous: tuple[Entry, Contents] | None,
    ) -> int:
        """Create the table of contents, then remove what it replaces; how many objects
        were removed."""
        encoded = table.encode()
        key = Layout.contents_key(folder.folder, table.end)
        try:
            etag = self.bucket.create(key, encoded)
        except Conflict:
            # Another writer rolled over to the same end first: the same table.
            folder.contents = self._existing(session_id, key, table.end) or folder.contents
            return 0
        except UnknownOutcome as exc:
            _log.debug("roll-over of %r postponed: %s: %s", session_id, key, exc)
            return 0
        entry = Entry(key, etag, len(encoded), "toc", 0, table.end)
        self.catalog.remember_contents(entry, table, len(encoded))
        folder.contents = (entry, table)
        # What this table replaces, and again what the one before it replaced (in case its
        # writer died before removing it); never anything this table lists.
        listed = {p.key for p in table.pieces}
        relative = set(table.replaces) | set(previous[1].replaces if previous else ())
        doomed = sorted(folder.folder + key for key in relative - listed)
        if not doomed:
            return 0
        try:
            self.bucket.delete(doomed)
        except ChatkeepError as exc:  # only garbage is left: nothing reads it
            _log.debug("roll-over of %r left garbage: %s", session_id, exc)
            return 0
        return len(doomed)

    def _records(self, session_id: str, folder: SessionFolder, leaf: Span) -> list[Record]:
        """The records of a piece of the previous table that a new chunk absorbs (from its
        segments if the piece is lost)."""
        assert leaf.key is not None
        known = folder.contents[1].pieces if folder.contents is not None else ()
        etag = next((p.etag for p in known if p.key == leaf.key), "")
        entry = piece_entry(
            folder.folder,
            Piece(leaf.start, leaf.end, leaf.size, leaf.key, Bloom(b""), etag),
        )
        try:
            loaded = self.catalog.fetch(session_id, entry)
            if loaded.start == leaf.start and loaded.header.end == leaf.end:
                return loaded.records
        except (Gone, ChatkeepError):
            pass
        return self.reader.segment_records(session_id, folder.folder, leaf.start, leaf.end)

    def _existing(self, session_id: str, key: str, end: int) -> tuple[Entry, Contents] | None:
        got = self.bucket.get(key)
        if got is None:
            return None
        entry = Entry(key, got[1], len(got[0]), "toc", 0, end)
        try:
            table = Contents.decode(got[0])
        except ContentsError:
            return None
        self.catalog.remember_contents(entry, table, len(got[0]))
        return entry, table
