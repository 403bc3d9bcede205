"""The S3 backend: each append is one new object; nothing is ever rewritten.

``append`` claims the next log position by creating ``<session>/seg/<position>`` with
``If-None-Match: *``. S3 lets exactly one writer create a key, so two writers can never
both hold a position; the loser lists what was written meanwhile, learns the new end and
tries there. The instance remembers each session's end (and which record ids it has seen),
so an append from a warm instance is one PUT, and a read one LIST plus GETs of segments it
has not cached (segments never change, so cached ones stay valid).

See :mod:`chatkeep.s3.cover` for how reads choose objects, and
:mod:`chatkeep.s3.compaction` for consolidating small segments.
"""

from __future__ import annotations

import random
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any, ClassVar

from chatkeep.core import CorruptRecord, Record, StoreUnavailable

from . import compaction, segments
from .bucket import Bucket, Changed, Conflict, Listed, UnknownOutcome, make_client
from .cache import LRUCache
from .config import S3Options, make_options, parse_url
from .cover import (
    Entry,
    Piece,
    Span,
    cover,
    overlapping,
    pieces,
    speculative_window,
    window,
    with_end,
)
from .keys import Layout, decode_session, encode_prefix, hashed_matches, is_hashed
from .segments import Loaded
from .view import SessionView, Snapshot, coverage_key, snapshot_for

__all__ = ["S3Store"]

_MAX_VIEWS = 10_000
_READ_ATTEMPTS = 5
_UNKNOWN_ATTEMPTS = 3
#: Keys in the first page of a cold listing: enough for a short session in one request,
#: few enough that a compacted session's guards cost little before the jump past them.
_FIRST_PAGE = 100


class _Stale(Exception):
    """The listing a read planned from is out of date: list again and retry."""


class _Gap(Exception):
    """The log has a gap (expired objects, or a delete that raced a writer)."""


class S3Store:
    """Session logs in an S3 bucket (or any S3-compatible store), through boto3.

    ``open_store("s3://my-bucket/chats?region=eu-west-1")``; see the package README for
    every URL option, the key layout, guarantees and costs. Thread-safe.
    """

    capabilities: ClassVar[frozenset[str]] = frozenset(
        {"delete", "list_sessions", "close", "shared", "durable"}
    )

    def __init__(self, bucket: str | S3Options = "", /, **options: Any) -> None:
        if isinstance(bucket, S3Options):
            self.options = make_options(
                {f: getattr(bucket, f) for f in bucket.__dataclass_fields__}, options
            )
        else:
            self.options = make_options({"bucket": bucket}, options)
        self.layout = Layout.for_prefix(self.options.prefix)
        self._owns_client = self.options.client is None
        self.bucket = Bucket(make_client(self.options), self.options)
        self._bodies: LRUCache[tuple[segments.Header, list[Record]]] = LRUCache(
            self.options.cache_bytes
        )
        # Headers are small and let a ranged read skip refetching them.
        self._headers: LRUCache[segments.Header] = LRUCache(4 * 1024 * 1024)
        self._views: OrderedDict[str, SessionView] = OrderedDict()
        self._views_lock = threading.Lock()
        self._executor: ThreadPoolExecutor | None = None
        self._executor_lock = threading.Lock()
        self._closed = False

    @classmethod
    def from_url(cls, url: str, **options: Any) -> S3Store:
        """``s3://bucket/prefix?endpoint_url=...&region=...`` plus keyword options."""
        return cls(parse_url(url, **options))

    def __repr__(self) -> str:
        return f"<S3Store {self.options.describe()}>"

    # -- plumbing -------------------------------------------------------------------------

    def _view(self, session_id: str) -> SessionView:
        with self._views_lock:
            view = self._views.get(session_id)
            if view is None:
                view = SessionView(self.layout.session_dir(session_id))
                self._views[session_id] = view
                if len(self._views) > _MAX_VIEWS:
                    self._views.popitem(last=False)
            else:
                self._views.move_to_end(session_id)
            return view

    def executor(self) -> ThreadPoolExecutor:
        """The thread pool that fetches objects in parallel (created on first use)."""
        with self._executor_lock:
            if self._closed:
                raise StoreUnavailable(f"the S3 store {self.options.describe()} is closed")
            if self._executor is None:
                self._executor = ThreadPoolExecutor(
                    max_workers=self.options.max_workers, thread_name_prefix="chatkeep-s3"
                )
            return self._executor

    def _check_open(self) -> None:
        if self._closed:
            raise StoreUnavailable(f"the S3 store {self.options.describe()} is closed")

    # -- listing --------------------------------------------------------------------------

    def _known_end(self, entry: Entry) -> Entry:
        header = self._headers.get(entry.key, entry.etag)
        return entry if header is None else replace(entry, end=header.end)

    def list_all(self, view: SessionView, *, complete: bool = False) -> None:
        """List the session folder (call with ``view.lock`` held).

        Unless ``complete``, the guards are skipped: a short first page shows the chunks
        (their keys sort first), then the listing jumps to where their coverage ends, so a
        session compacted long ago lists in two small requests, not one per 1,000 appends.
        """
        first_page = 1000 if complete else _FIRST_PAGE
        items, token = self.bucket.list_page(view.folder, max_keys=first_page)
        found_segments: list[Entry] = []
        found_chunks: list[Entry] = []
        self._sort_into(view, items, found_segments, found_chunks)
        if token is not None:
            jump = None if complete else coverage_key(view.folder, found_segments, found_chunks)
            if jump is None:
                rest = self.bucket.list_objects(view.folder, token=token)
            else:
                after = max(items[-1].key, jump)
                rest = self.bucket.list_objects(view.folder + "seg/", start_after=after)
            self._sort_into(view, rest, found_segments, found_chunks)
        known = {e.key_etag: e.end for e in view.segments if e.end is not None}
        view.segments = sorted(
            (
                entry if entry.end is not None else replace(entry, end=known.get(entry.key_etag))
                for entry in found_segments
            ),
            key=lambda entry: entry.start,
        )
        view.chunks = found_chunks
        view.listed = True
        live = {e.key_etag for e in view.segments} | {e.key_etag for e in found_chunks}
        view.ids = {rid: where for rid, where in view.ids.items() if where in live}

    def _sort_into(
        self, view: SessionView, items: Iterable[Listed], segs: list[Entry], chunks: list[Entry]
    ) -> None:
        for item in items:
            parsed = Layout.parse(view.folder, item.key)
            if parsed is None:
                continue
            if parsed.kind == "seg":
                segs.append(self._known_end(Entry(item.key, item.etag, item.size, parsed.start)))
            elif parsed.kind == "cmp":
                chunks.append(
                    Entry(item.key, item.etag, item.size, parsed.start, parsed.end, chunk=True)
                )
            else:
                view.named = True

    def _refresh(self, view: SessionView) -> None:
        """Bring ``view`` up to date with one LIST (call with ``view.lock`` held).

        A warm view lists only from its second-to-last segment on: the first key returned
        must be its last known segment, unchanged, or something happened to the session
        (deleted, compacted) and the whole folder is listed again.
        """
        known = view.segments
        if not view.listed or not known:
            self.list_all(view)
            return
        anchor = known[-2].key if len(known) >= 2 else None
        listed: list[Entry] = []
        for item in self.bucket.list_objects(view.folder + "seg/", anchor):
            parsed = Layout.parse(view.folder, item.key)
            if parsed is not None and parsed.kind == "seg":
                listed.append(self._known_end(Entry(item.key, item.etag, item.size, parsed.start)))
        last = known[-1]
        if (
            not listed
            or listed[0].key != last.key
            or _etag(listed[0].etag) != _etag(last.etag)
            or any(entry.guard for entry in listed[1:])
        ):
            self.list_all(view)
            return
        view.segments.extend(listed[1:])

    # -- fetching -------------------------------------------------------------------------

    def fetch(self, session_id: str, entry: Entry, want: int | None = None) -> Loaded:
        """Read the records of ``entry`` from position ``want`` (default: all of them).

        Raises :class:`_Stale` if the object changed since it was listed.
        """
        cached = self._bodies.get(entry.key, entry.etag)
        if cached is not None:
            return Loaded(cached[0].start, cached[1], cached[0])
        if (
            entry.chunk
            and want is not None
            and want > entry.start
            and entry.size > self.options.range_threshold
        ):
            return self._fetch_range(session_id, entry, want)
        try:
            got = self.bucket.get(entry.key, etag=entry.etag or None)
        except Changed:
            raise _Stale(entry.key) from None
        if got is None or not got[0]:
            raise _Stale(entry.key)  # gone, or a guard by now
        body = got[0]
        try:
            header, records = segments.decode(body)
        except segments.SegmentFormatError as exc:
            raise CorruptRecord(session_id, entry.start, f"object {entry.key}: {exc}") from None
        self._check(session_id, entry, header)
        self._bodies.put(entry.key, entry.etag, (header, records), len(body))
        self._headers.put(entry.key, entry.etag, header, len(header.ids) + 1)
        return Loaded(header.start, records, header)

    def _check(self, session_id: str, entry: Entry, header: segments.Header) -> None:
        if header.start != entry.start or (entry.chunk and header.end != entry.end):
            raise CorruptRecord(
                session_id,
                entry.start,
                f"object {entry.key} holds positions {header.start}..{header.end - 1}, "
                "not what its key says",
            )

    def _fetch_range(self, session_id: str, entry: Entry, want: int) -> Loaded:
        """Read a large chunk's records from ``want`` on with ranged GETs."""
        try:
            header = self._headers.get(entry.key, entry.etag)
            if header is None:
                header = self._read_header(session_id, entry)
            index = want - header.start
            first, last = header.offsets[index], header.offsets[-1]
            data = b""
            if last > first:
                got = self.bucket.get(entry.key, etag=entry.etag, first=first, last=last - 1)
                if got is None or len(got[0]) != last - first:
                    raise _Stale(entry.key)
                data = got[0]
        except Changed:
            raise _Stale(entry.key) from None
        records = header.records(memoryview(data), index, header.count, base=first)
        return Loaded(want, records, header)

    def _read_header(self, session_id: str, entry: Entry) -> segments.Header:
        got = self.bucket.get(
            entry.key, etag=entry.etag, first=0, last=segments.HEADER_PROBE_BYTES - 1
        )
        if got is None:
            raise _Stale(entry.key)
        prefix = got[0]
        try:
            parsed = segments.parse_header(prefix)
            if isinstance(parsed, int):
                more = self.bucket.get(
                    entry.key, etag=entry.etag, first=len(prefix), last=parsed - 1
                )
                if more is None:
                    raise _Stale(entry.key)
                parsed = segments.parse_header(prefix + more[0])
                if isinstance(parsed, int):
                    raise segments.SegmentFormatError("segment header truncated")
        except segments.SegmentFormatError as exc:
            raise CorruptRecord(session_id, entry.start, f"object {entry.key}: {exc}") from None
        self._check(session_id, entry, parsed)
        self._headers.put(entry.key, entry.etag, parsed, len(parsed.ids) + 1)
        return parsed

    def fetch_many(
        self, session_id: str, wanted: Sequence[tuple[Entry, int | None]]
    ) -> dict[str, Loaded]:
        """:meth:`fetch` several objects in parallel; results by key."""
        unique = list({entry.key: (entry, want) for entry, want in wanted}.values())
        if len(unique) <= 1:
            return {entry.key: self.fetch(session_id, entry, want) for entry, want in unique}
        futures = [
            (entry.key, self.executor().submit(self.fetch, session_id, entry, want))
            for entry, want in unique
        ]
        return {key: future.result() for key, future in futures}

    def _learn(
        self, view: SessionView, loaded: dict[str, Loaded], entries: Iterable[Entry]
    ) -> None:
        with view.lock:
            for entry in entries:
                got = loaded.get(entry.key)
                if got is not None:
                    view.learn(entry, got.header)

    # -- read -----------------------------------------------------------------------------

    def read(self, session_id: str, start: int = 0, stop: int | None = None) -> list[Record]:
        """The session's records ``log[start:stop]``: one LIST, then parallel GETs of the
        objects holding them that are not cached."""
        self._check_open()
        view = self._view(session_id)
        for attempt in range(_READ_ATTEMPTS):
            with view.lock:
                if attempt == 0:
                    self._refresh(view)
                else:
                    self.list_all(view)
                snapshot = snapshot_for(view, start, stop)
            try:
                try:
                    return self._read_listing(session_id, view, snapshot, start, stop)
                except _Gap:
                    return self._read_with_gaps(session_id, view, snapshot, start, stop)
            except _Stale:
                continue
        raise StoreUnavailable(
            f"session {session_id!r} kept changing while being read from "
            f"{self.options.describe()}; try again"
        )

    def _read_listing(
        self, session_id: str, view: SessionView, snapshot: Snapshot, start: int, stop: int | None
    ) -> list[Record]:
        spans = cover(pieces(snapshot.segments, snapshot.chunks))
        if spans is None:
            raise _Gap
        if not spans:
            return []
        origin, last = spans[0].lo, spans[-1]
        if last.hi is not None:
            lo, hi = window(spans, start, stop)
            if lo >= hi:
                return []
            wanted = overlapping(spans, lo, hi)
        else:
            # The last segment is unread, so the log's length is not known yet: fetch
            # everything the answer could need in one parallel round.
            spec_lo, spec_hi = speculative_window(spans, start, stop)
            wanted = overlapping(spans, spec_lo, spec_hi)
            lo = int(spec_lo)
            shortest = last.lo + 1 - origin
            determined = start >= 0 and stop is not None and 0 <= stop <= shortest
            if not determined and wanted[-1:] != [len(spans) - 1]:
                wanted.append(len(spans) - 1)
        loaded = self.fetch_many(
            session_id, [(spans[i].piece.entry, max(spans[i].lo, lo)) for i in wanted]
        )
        self._verify(spans, wanted, loaded)
        self._learn(view, loaded, (spans[i].piece.entry for i in wanted))
        if last.hi is None:
            got_last = loaded.get(last.piece.key)
            if got_last is None:
                # The slice ends before the last segment, so the log's length is irrelevant.
                assert stop is not None
                lo, hi = origin + start, origin + max(start, stop)
            else:
                spans = with_end(spans, got_last.header.end)
                lo, hi = window(spans, start, stop)
            if lo >= hi:
                return []
            needed = overlapping(spans, lo, hi)
            if not set(needed) <= set(wanted):  # pragma: no cover - speculation is a superset
                raise _Stale("read plan")
            wanted = needed
        out: list[Record] = []
        for index in wanted:
            span = spans[index]
            got = loaded[span.piece.key]
            first = max(span.lo, lo) - got.start
            last_index = (hi if span.hi is None else min(span.hi, hi)) - got.start
            out.extend(got.records[first:last_index])
        return out

    @staticmethod
    def _verify(spans: Sequence[Span], wanted: Sequence[int], loaded: dict[str, Loaded]) -> None:
        """A segment whose end was inferred from the next key must really end there; if it
        ends earlier, positions between are missing (a gap)."""
        for index in wanted:
            piece: Piece = spans[index].piece
            if not piece.exact and piece.end not in (None, loaded[piece.key].header.end):
                raise _Gap

    def _read_with_gaps(
        self, session_id: str, view: SessionView, snapshot: Snapshot, start: int, stop: int | None
    ) -> list[Record]:
        """Read everything, skip the gaps, then slice: correct, but O(log); only used when a
        lifecycle rule or a raced delete left holes."""
        found = pieces(snapshot.segments, snapshot.chunks)
        loaded = self.fetch_many(session_id, [(piece.entry, None) for piece in found])
        self._learn(view, loaded, (piece.entry for piece in found))
        exact = [Piece(p.entry, p.start, loaded[p.key].header.end, exact=True) for p in found]
        log: list[Record] = []
        for span in cover(exact, skip_gaps=True) or ():
            got = loaded[span.piece.key]
            assert span.hi is not None
            log.extend(got.records[span.lo - got.start : span.hi - got.start])
        return log[start:stop]

    # -- append ---------------------------------------------------------------------------

    def append(self, session_id: str, records: list[Record]) -> None:
        """Append ``records`` as one new object at the end of the session's log.

        One PUT when this instance knows the end; on losing the position to another
        writer, one LIST (plus GETs of the segments it missed) per retry. Records whose ids
        this instance has seen in the session are skipped, so a retried batch is a no-op.
        """
        self._check_open()
        view = self._view(session_id)
        with view.lock:
            if is_hashed(view.folder[len(self.layout.root) : -1]) and not view.named:
                self.bucket.put(Layout.id_key(view.folder), session_id.encode("utf-8"))
                view.named = True
            if view.pending:
                self._resolve_pending(session_id, view)
            if not view.listed:
                self._catch_up(session_id, view, since=None)
            batch = self._unseen(view, records)
            if batch and view.end() is None:
                self._catch_up(session_id, view, since=None)
            conflicts = unknown = 0
            while batch:
                position = view.end()
                assert position is not None
                key = Layout.segment_key(view.folder, position)
                body = segments.encode(position, batch)
                try:
                    etag = self.bucket.create(key, body)
                except Conflict:
                    conflicts += 1
                    if conflicts > self.options.max_conflicts:
                        raise StoreUnavailable(
                            f"gave up appending to session {session_id!r} after {conflicts - 1} "
                            "positions were taken by other writers; nothing was stored"
                        ) from None
                    if conflicts > 1:
                        _backoff(conflicts)
                    self._catch_up(session_id, view, since=position)
                except UnknownOutcome as exc:
                    unknown += 1
                    try:
                        found = self._probe(session_id, view, position)
                    except StoreUnavailable:
                        view.pending.add(position)
                        raise
                    if found:
                        self._catch_up(session_id, view, since=position)
                    elif unknown >= _UNKNOWN_ATTEMPTS:
                        view.pending.add(position)
                        raise StoreUnavailable(
                            f"S3 PutObject failed {unknown} times on "
                            f"{self.options.describe()} ({exc}); the batch was not stored, "
                            "retrying the append is safe"
                        ) from exc
                else:
                    self._remember(view, Entry(key, etag, len(body), position), batch, body)
                    return
                batch = [record for record in batch if record.id not in view.ids]

    def _remember(self, view: SessionView, entry: Entry, batch: list[Record], body: bytes) -> None:
        """Record our own successful write: the new end, its ids, and its body (cached, so
        the next read does not fetch what we just wrote)."""
        header = segments.parse_header(body)
        assert isinstance(header, segments.Header)
        entry = replace(entry, end=header.end)
        view.insert(entry)
        view.learn(entry, header)
        self._bodies.put(entry.key, entry.etag, (header, list(batch)), len(body))
        self._headers.put(entry.key, entry.etag, header, len(batch) + 1)

    def _catch_up(self, session_id: str, view: SessionView, since: int | None) -> None:
        """List what others appended and read enough to know the end: the last segment,
        and the segment at ``since`` (a position we just lost: if an earlier attempt of
        ours did land there unseen, its ids show it). Call with ``view.lock`` held."""
        for attempt in range(_READ_ATTEMPTS):
            if attempt == 0:
                self._refresh(view)
            else:
                self.list_all(view)
            holders = [entry for entry in view.segments if not entry.guard]
            targets = [e for e in holders if e.start == since and e.end is None]
            if holders and holders[-1].end is None and holders[-1] not in targets:
                targets.append(holders[-1])
            if not targets:
                return
            try:
                loaded = self.fetch_many(session_id, [(entry, None) for entry in targets])
            except _Stale:
                continue
            self._learn(view, loaded, targets)
            return
        raise StoreUnavailable(
            f"session {session_id!r} kept changing on {self.options.describe()}; try again"
        )

    def _probe(self, session_id: str, view: SessionView, position: int) -> bool:
        """After a write with no answer: is the segment at ``position`` there? If so, learn
        its ids (our own batch, if the write did land)."""
        key = Layout.segment_key(view.folder, position)
        got = self.bucket.get(key)
        if got is None:
            return False
        body, etag = got
        entry = Entry(key, etag, len(body), position)
        if body:
            try:
                header, records = segments.decode(body)
            except segments.SegmentFormatError as exc:
                raise CorruptRecord(session_id, position, f"object {key}: {exc}") from None
            self._check(session_id, entry, header)
            entry = replace(entry, end=header.end)
            self._bodies.put(key, etag, (header, records), len(body))
            self._headers.put(key, etag, header, len(header.ids) + 1)
            view.insert(entry)
            view.learn(entry, header)
        else:
            view.insert(entry)
        return True

    def _resolve_pending(self, session_id: str, view: SessionView) -> None:
        for position in sorted(view.pending):
            self._probe(session_id, view, position)
            view.pending.discard(position)

    def _unseen(self, view: SessionView, records: list[Record]) -> list[Record]:
        """``records`` minus those already stored, as far as this instance has seen.

        Each object said to hold a seen id is checked with a HEAD (it may have been
        deleted by another process since), so this costs a request only for retries.
        """
        holders = {view.ids[record.id] for record in records if record.id in view.ids}
        if not holders:
            return list(records)
        if not all(self.bucket.exists(key, etag) for key, etag in holders):
            self.list_all(view)  # drops ids whose objects are gone
        return [record for record in records if record.id not in view.ids]

    # -- delete, list, close --------------------------------------------------------------

    def delete(self, session_id: str) -> None:
        """Erase every object of the session (``DeleteObjects``, 1,000 keys per request)."""
        self._check_open()
        view = self._view(session_id)
        with view.lock:
            for _ in range(5):
                keys = [item.key for item in self.bucket.list_objects(view.folder)]
                if not keys:
                    break
                self.bucket.delete(keys)
            else:
                raise StoreUnavailable(
                    f"objects of session {session_id!r} kept appearing while deleting it"
                )
            view.segments, view.chunks, view.ids = [], [], {}
            view.pending.clear()
            view.listed, view.named = True, False

    def list_sessions(self, prefix: str | None = None) -> Iterator[str]:
        """Session ids (starting with ``prefix``), lazily, one delimiter LIST per 1,000."""
        self._check_open()
        root = self.layout.root
        for folder in self.bucket.list_folders(root + encode_prefix(prefix or "")):
            encoded = folder[len(root) : -1]
            session_id: str | None
            if is_hashed(encoded):
                got = self.bucket.get(Layout.id_key(folder))
                try:
                    session_id = None if got is None else got[0].decode("utf-8")
                except UnicodeDecodeError:
                    session_id = None
                if session_id is None or not hashed_matches(encoded, session_id):
                    continue
            else:
                session_id = decode_session(encoded)
            if session_id is not None and (prefix is None or session_id.startswith(prefix)):
                yield session_id

    def close(self) -> None:
        """Stop the fetch threads and close the HTTP connections. Idempotent."""
        with self._executor_lock:
            if self._closed:
                return
            self._closed = True
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=True)
        self._bodies.clear()
        self._headers.clear()
        if self._owns_client:
            close = getattr(self.bucket.client, "close", None)
            if close is not None:
                close()

    # -- compaction -----------------------------------------------------------------------

    def compact(
        self,
        session_id: str,
        *,
        max_chunk_records: int = compaction.MAX_CHUNK_RECORDS,
        max_chunk_bytes: int = compaction.MAX_CHUNK_BYTES,
    ) -> compaction.CompactionResult:
        """Consolidate the session's small segments into chunks (see
        :mod:`chatkeep.s3.compaction`). Safe to run at any time, and to interrupt::

            store.backend.compact("session-1")
        """
        self._check_open()
        return compaction.compact(
            self,
            session_id,
            max_chunk_records=max_chunk_records,
            max_chunk_bytes=max_chunk_bytes,
        )

    def view_for(self, session_id: str) -> SessionView:
        """The instance's knowledge of one session (for :mod:`chatkeep.s3.compaction`)."""
        return self._view(session_id)


def _etag(etag: str) -> str:
    # Some S3-compatible stores quote ETags in one API and not in another.
    return etag.strip('"')


def _backoff(conflicts: int) -> None:
    # Many writers racing for one position: spread the retries out (full jitter).
    time.sleep(random.uniform(0, min(0.5, 0.005 * 2 ** min(conflicts, 8))))
