"""Appending: one conditional PUT of the next segment, after checking the batch's ids.

``append`` creates ``log/<end>.seg`` with ``If-None-Match: *``. S3 lets exactly one request
create a key, so two writers can never both hold a position; the loser (412, or 409 while
the other write is in flight) lists the newest key, reads the new newest segment, and tries
again at the new end. That same single PUT is what makes ``append_if`` atomic: the
condition (the last record id) is checked against the handle's knowledge of the end, and
the PUT succeeds only if nothing was appended since.

Before each PUT the batch's record ids are checked against the whole log without reading
it (:mod:`chatkeep.s3.recordids`): ids stored with the same data are dropped, an id stored
with other data refuses the batch with :class:`~chatkeep.core.errors.RecordConflict`. So a
batch acknowledged by a process that then crashed, sent again by another process after
others appended, stores nothing new; and a write whose answer was lost is retried safely
(if it landed, the retry finds its records).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import Any

from chatkeep.core.backend import (
    AppendConflict,
    CorruptRecord,
    Record,
    RecordConflict,
    StoreUnavailable,
)

from . import frames
from .bucket import Bucket, Conflict, UnknownOutcome
from .catalog import Catalog, Entry, Gone, Loaded
from .contents import Contents, Piece
from .folder import SessionFolder, Tip
from .layout import Layout
from .reading import piece_entry
from .recordids import id_hashes, short_hash

__all__ = ["ANY", "Appender"]

_UNKNOWN_ATTEMPTS = 3
_LEARN_ATTEMPTS = 5

#: ``append_if``'s ``after`` for a plain append: any end will do.
ANY: Any = object()


class Appender:
    """Appends to session logs for one store."""

    def __init__(
        self,
        bucket: Bucket,
        catalog: Catalog,
        *,
        max_conflicts: int,
        rollover_guess: int,
        legacy_check: Callable[[str, SessionFolder], None],
    ) -> None:
        self.bucket = bucket
        self.catalog = catalog
        self.max_conflicts = max_conflicts
        self.rollover_guess = rollover_guess
        self.legacy_check = legacy_check

    # -- the hook ---------------------------------------------------------------------------

    def append(
        self, session_id: str, folder: SessionFolder, records: list[Record], after: Any = ANY
    ) -> bool:
        """Append what is new of ``records`` (call with ``folder.lock`` held); whether a
        segment was written. With ``after``, only if the last record id is ``after``."""
        if not folder.known:
            self.learn(session_id, folder)
        conflicts = unknown = 0
        while True:
            fresh = self.fresh(session_id, folder, records)
            if not fresh:
                return False
            if after is not ANY and folder.last_id() != after:
                raise AppendConflict(session_id, after)
            position = folder.end()
            base = folder.contents_end
            body = frames.encode(position, fresh, base=base, recent=folder.recent())
            key = Layout.segment_key(folder.folder, position)
            try:
                etag = self.bucket.create(key, body)
            except Conflict:
                conflicts += 1
                if conflicts > self.max_conflicts:
                    raise StoreUnavailable(
                        f"gave up appending to session {session_id!r} after {conflicts - 1} "
                        "positions were taken by other writers; nothing was stored"
                    ) from None
                if conflicts > 1:
                    _backoff(conflicts)
                self.learn(session_id, folder)
                continue
            except UnknownOutcome as exc:
                # It may have landed: learning the end again finds it, and the id check
                # then drops the batch as already stored.
                folder.known = False
                unknown += 1
                if unknown >= _UNKNOWN_ATTEMPTS:
                    raise StoreUnavailable(
                        f"S3 PutObject failed {unknown} times on {self.bucket.where} "
                        f"({exc}); the batch may or may not be stored, and retrying the "
                        "append is safe"
                    ) from None
                self.learn(session_id, folder)
                continue
            entry = Entry(key, etag, len(body), "seg", position)
            header = frames.parse_header(body)
            assert isinstance(header, frames.Header)
            self.catalog.remember(entry, header, fresh, len(body))
            folder.tip = Tip(entry, header)
            folder.extra = {}
            folder.remember(entry)
            folder.known = True
            return True

    # -- knowing the end --------------------------------------------------------------------

    def learn(self, session_id: str, folder: SessionFolder) -> None:
        """List the newest keys and read the newest segment and table of contents (call
        with ``folder.lock`` held)."""
        for _ in range(_LEARN_ATTEMPTS):
            try:
                self._learn(session_id, folder)
                return
            except Gone:
                continue
        raise StoreUnavailable(
            f"session {session_id!r} kept changing on {self.bucket.where}; try again"
        )

    def _learn(self, session_id: str, folder: SessionFolder) -> None:
        folder.known = False
        rollover = folder.contents[1].policy.rollover if folder.contents else self.rollover_guess
        scan = self.catalog.scan(
            folder.folder,
            page=rollover + 3,
            enough=lambda s: bool(s.segments) or bool(s.contents),
            known=folder.listing,
        )
        folder.keep_listing(scan)
        newest = scan.segments[0] if scan.segments else None
        toc = scan.contents[0] if scan.contents else None
        if newest is None and toc is None:
            self.legacy_check(session_id, folder)
            folder.forget()
            folder.known = True
            return
        wanted: list[tuple[Entry, int | None]] = []
        if newest is not None and (toc is None or newest.start >= (toc.end or 0)):
            wanted.append((newest, None))
        else:
            newest = None  # the table of contents reaches past every segment listed
        # The newest segment and the table of contents, in parallel.
        results, table = self.catalog.together(
            lambda: self.catalog.fetch_many(session_id, wanted),
            lambda: self._contents(session_id, folder, toc),
        )
        tip = None
        if newest is not None:
            got = results[newest.key]
            if isinstance(got, BaseException):
                raise got
            tip = Tip(newest, got.header)
            folder.remember(newest)
        folder.tip = tip
        folder.extra = {}
        if (
            tip is not None
            and tip.header.base
            and (table is None or table[1].end < tip.header.base)
        ):
            table = self._older_contents(session_id, folder, tip, table)
        folder.contents = table
        folder.known = True

    def _contents(
        self, session_id: str, folder: SessionFolder, toc: Entry | None
    ) -> tuple[Entry, Contents] | None:
        if toc is None:
            return None
        known = folder.contents
        if known is not None and known[0].key == toc.key and known[0].etag == toc.etag:
            return known
        try:
            table = self.catalog.contents(session_id, toc)
        except Gone:
            return None
        return None if table is None else (toc, table)

    def _older_contents(
        self,
        session_id: str,
        folder: SessionFolder,
        tip: Tip,
        table: tuple[Entry, Contents] | None,
    ) -> tuple[Entry, Contents] | None:
        """The tip's writer knew a table of contents ending at its ``base`` that is not in
        the first page: read it by key; if it is gone, use the newest older one and read
        the segments between (so every id before the tip is still checked)."""
        base = tip.header.base or 0
        key = Layout.contents_key(folder.folder, base)
        got = self.bucket.get(key)
        if got is not None:
            entry = Entry(key, got[1], len(got[0]), "toc", 0, base)
            found = self._contents(session_id, folder, entry)
            if found is not None:
                return found
        if table is None:
            scan = self.catalog.scan(
                folder.folder, below=base, page=1000, enough=lambda s: bool(s.contents)
            )
            for candidate in scan.contents:
                table = self._contents(session_id, folder, candidate)
                if table is not None:
                    break
        floor = table[1].end if table is not None else 0
        scan = self.catalog.scan(
            folder.folder,
            below=base,
            page=min(1000, base - floor + 3),
            enough=lambda s: s.lowest is not None and s.lowest <= floor,
        )
        between = [e for e in scan.segments if floor <= e.start < base]
        results = self.catalog.fetch_many(session_id, [(e, None) for e in between])
        for entry in between:
            got_segment = results[entry.key]
            if isinstance(got_segment, Loaded):
                folder.extra[entry.start] = got_segment
        return table

    # -- the id check -----------------------------------------------------------------------

    def fresh(self, session_id: str, folder: SessionFolder, records: list[Record]) -> list[Record]:
        """``records`` without those already stored with the same data; raises
        :class:`RecordConflict` for one stored with other data. Costs no request unless
        an id may be stored (a retry, or a false positive of the summaries)."""
        stored: dict[str, bytes] = {}
        tip = folder.tip
        candidates: set[int] = set()
        pieces: dict[int, tuple[Piece, list[str]]] = {}
        table = folder.contents[1] if folder.contents is not None else None
        for loaded in folder.extra.values():
            for record in loaded.records:
                stored[record.id] = record.data
        for record in records:
            if record.id in stored:
                continue
            if tip is not None:
                if record.id in tip.header.ids:
                    candidates.add(tip.entry.start)
                    continue
                candidates.update(tip.header.recent.holders(short_hash(record.id)))
            if table is not None:
                hashes = id_hashes(record.id)
                for index, piece in enumerate(table.pieces):
                    if piece.bloom.might_hold(hashes):
                        pieces.setdefault(index, (piece, []))[1].append(record.id)
        if candidates:
            self._read_segments(session_id, folder, candidates, stored)
        for piece, ids in pieces.values():
            self._read_piece_ids(session_id, folder, piece, ids, stored)
        fresh: list[Record] = []
        for record in records:
            data = stored.get(record.id)
            if data is None:
                fresh.append(record)
            elif data != record.data:
                raise RecordConflict(session_id, record.id)
        return fresh

    def _read_segments(
        self, session_id: str, folder: SessionFolder, starts: set[int], stored: dict[str, bytes]
    ) -> None:
        for start in sorted(starts):
            known = folder.seen.get(start)
            try:
                found = self.catalog.fetch_segment(session_id, folder.folder, start, known)
            except CorruptRecord:
                continue  # a damaged segment holds nothing to compare with
            if found is None:
                continue
            entry, loaded = found
            folder.remember(entry)
            for record in loaded.records:
                stored.setdefault(record.id, record.data)

    def _read_piece_ids(
        self,
        session_id: str,
        folder: SessionFolder,
        piece: Piece,
        ids: list[str],
        stored: dict[str, bytes],
    ) -> None:
        entry = piece_entry(folder.folder, piece)
        try:
            header = self.catalog.header(session_id, entry)
        except (Gone, CorruptRecord):
            # The copy is lost: ask its segments instead.
            self._read_range(session_id, folder, piece, ids, stored)
            return
        index = {record_id: n for n, record_id in enumerate(header.ids)}
        for record_id in ids:
            n = index.get(record_id)
            if n is None:
                continue
            first, last = header.offsets[n], header.offsets[n + 1]
            if last == first:
                stored.setdefault(record_id, b"")
                continue
            got = self.bucket.get(entry.key, first=first, last=last - 1)
            if got is not None and len(got[0]) == last - first:
                stored.setdefault(record_id, got[0])

    def _read_range(
        self,
        session_id: str,
        folder: SessionFolder,
        piece: Piece,
        ids: list[str],
        stored: dict[str, bytes],
    ) -> None:
        lo, hi = piece.start, piece.end
        scan = self.catalog.scan(
            folder.folder,
            below=hi,
            page=min(1000, hi - lo + 3),
            enough=lambda s: s.lowest is not None and s.lowest <= lo,
        )
        inside = [e for e in scan.segments if e.start < hi]
        results = self.catalog.fetch_many(session_id, [(e, None) for e in inside])
        wanted = set(ids)
        for result in results.values():
            if isinstance(result, Loaded):
                for record in result.records:
                    if record.id in wanted:
                        stored.setdefault(record.id, record.data)


def _backoff(conflicts: int) -> None:
    # Many writers racing for one position: spread the retries out (full jitter).
    time.sleep(random.uniform(0, min(0.5, 0.005 * 2 ** min(conflicts, 8))))
