"""Listing and fetching a session's objects, with caches; no decisions about the log.

A listing of ``<session>/log/`` comes back newest first (see :mod:`chatkeep.s3.layout`):
segments by descending start, each table of contents where its end falls. :meth:`Catalog.scan`
reads it page by page until its caller has seen enough. Objects never change once written,
so decoded bodies, headers and tables of contents are cached by (key, ETag) and stay valid;
a listing is always fresh, so nothing stale is ever served.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import TypeVar

from chatkeep.core.backend import CorruptRecord, Record

from . import frames
from .bucket import Bucket, Changed, Listed
from .cache import LRUCache
from .contents import Contents, ContentsError
from .layout import Layout

__all__ = ["Catalog", "Entry", "Gone", "Loaded", "Scan"]

A = TypeVar("A")
B = TypeVar("B")

#: Keys in the first page of a listing that starts from an earlier one.
_SHORT_PAGE = 4


class Gone(Exception):
    """An object listed a moment ago is no longer there (or changed): list again."""


@dataclass(frozen=True, slots=True)
class Entry:
    """One listed object of a session folder."""

    key: str
    etag: str
    size: int
    #: ``"seg"``, ``"toc"`` or ``"chunk"``.
    kind: str
    #: First position (segments, chunks) or ``0`` (tables of contents).
    start: int
    #: Exclusive end when known from the key (tables of contents, chunks), else ``None``.
    end: int | None = None


@dataclass(slots=True)
class Scan:
    """What a newest-first listing of a session's log has shown so far."""

    #: Segments, newest (highest start) first.
    segments: list[Entry] = field(default_factory=list)
    #: Tables of contents, newest first.
    contents: list[Entry] = field(default_factory=list)
    #: Whether the listing has reached the oldest key.
    bottom: bool = False
    #: Both kinds, in listing order (newest first).
    order: list[Entry] = field(default_factory=list)

    def add(self, entry: Entry) -> None:
        """Add the next entry of the listing."""
        self.order.append(entry)
        (self.segments if entry.kind == "seg" else self.contents).append(entry)

    @property
    def lowest(self) -> int | None:
        """The start of the oldest segment listed."""
        return self.segments[-1].start if self.segments else None


@dataclass(frozen=True, slots=True)
class Loaded:
    """Records read from one object: ``records[0]`` is at log position ``start``."""

    start: int
    records: list[Record]
    header: frames.Header

    def between(self, lo: int, hi: int) -> list[Record]:
        """The records at positions ``[lo, hi)`` (which must lie within this read)."""
        return self.records[lo - self.start : hi - self.start]


class Catalog:
    """Lists and fetches session objects for one store (thread-safe)."""

    def __init__(
        self,
        bucket: Bucket,
        *,
        cache_bytes: int,
        range_threshold: int,
        executor: Callable[[], ThreadPoolExecutor],
    ) -> None:
        self.bucket = bucket
        self.range_threshold = range_threshold
        self._executor = executor
        self._bodies: LRUCache[tuple[frames.Header, list[Record]]] = LRUCache(cache_bytes)
        # Headers and tables of contents are small and save ranged reads and GETs.
        self._headers: LRUCache[frames.Header] = LRUCache(4 * 1024 * 1024)
        self._contents: LRUCache[Contents] = LRUCache(4 * 1024 * 1024)
        self._lock = threading.Lock()

    def discard(self, key: str) -> None:
        """Forget every cached version of ``key``."""
        self._bodies.discard(key)
        self._headers.discard(key)
        self._contents.discard(key)

    def clear(self) -> None:
        """Forget every cached object."""
        self._bodies.clear()
        self._headers.clear()
        self._contents.clear()

    # -- listing ----------------------------------------------------------------------

    def scan(
        self,
        folder: str,
        *,
        enough: Callable[[Scan], bool],
        page: int = 40,
        below: int | None = None,
        known: Scan | None = None,
    ) -> Scan:
        """List ``folder``'s log newest first (from the segment starting at ``below``
        downwards, if given) until ``enough(scan)`` or the oldest key.

        ``known`` is an earlier listing from the top: if a short first page reaches its
        newest key, unchanged, what it listed below that is taken as it was (objects of the
        log are never rewritten), and a warm read lists a few keys instead of a page.
        """
        prefix = Layout.log_prefix(folder)
        if known is not None and known.order and below is None and (known.bottom or enough(known)):
            spliced = self._splice(folder, prefix, known)
            if spliced is not None and (spliced.bottom or enough(spliced)):
                return spliced
        start_after = None if below is None else Layout.below(folder, below)
        return self._list(folder, prefix, Scan(), enough, page, start_after=start_after)

    def _splice(self, folder: str, prefix: str, known: Scan) -> Scan | None:
        items, token = self.bucket.list_page(prefix, max_keys=_SHORT_PAGE)
        fresh = [entry for entry in (self._entry(folder, item) for item in items) if entry]
        newest = known.order[0]
        for index, entry in enumerate(fresh):
            if entry.key == newest.key:
                if entry.etag != newest.etag:
                    break
                scan = Scan(bottom=known.bottom)
                for kept in [*fresh[:index], *known.order]:
                    scan.add(kept)
                return scan
        if token is None:  # the whole log fits the short page
            scan = Scan(bottom=True)
            for entry in fresh:
                scan.add(entry)
            return scan
        return None

    def _list(
        self,
        folder: str,
        prefix: str,
        scan: Scan,
        enough: Callable[[Scan], bool],
        page: int,
        *,
        start_after: str | None,
    ) -> Scan:
        token: str | None = None
        while True:
            items, token = self.bucket.list_page(
                prefix, start_after=start_after, token=token, max_keys=page
            )
            for item in items:
                entry = self._entry(folder, item)
                if entry is not None:
                    scan.add(entry)
            if token is None:
                scan.bottom = True
                return scan
            if enough(scan):
                return scan
            page = 1000

    def _entry(self, folder: str, item: Listed) -> Entry | None:
        parsed = Layout.parse(folder, item.key)
        if parsed is None:
            return None
        if parsed.kind == "seg":
            return Entry(item.key, item.etag, item.size, "seg", parsed.start, self._end(item))
        if parsed.kind == "toc":
            return Entry(item.key, item.etag, item.size, "toc", 0, parsed.end)
        return None

    def _end(self, item: Listed) -> int | None:
        header = self._headers.get(item.key, item.etag)
        return None if header is None else header.end

    # -- fetching ---------------------------------------------------------------------

    def fetch(self, session_id: str, entry: Entry, want: int | None = None) -> Loaded:
        """The records of segment or chunk ``entry`` from position ``want`` (default: all).

        Raises :class:`Gone` if the object is no longer the listed version, and
        :class:`~chatkeep.core.errors.CorruptRecord` if its bytes are not what its key says.
        """
        cached = self._bodies.get(entry.key, entry.etag)
        if cached is not None:
            return Loaded(cached[0].start, cached[1], cached[0])
        if (
            want is not None
            and want > entry.start
            and entry.size > self.range_threshold
            and entry.kind == "chunk"
        ):
            return self._fetch_range(session_id, entry, want)
        try:
            got = self.bucket.get(entry.key, etag=entry.etag or None)
        except Changed:
            raise Gone(entry.key) from None
        if got is None:
            raise Gone(entry.key)
        body = got[0]
        try:
            header, records = frames.decode(body)
        except frames.FrameError as exc:
            raise CorruptRecord(session_id, entry.start, f"object {entry.key}: {exc}") from None
        self._check(session_id, entry, header)
        self.remember(entry, header, records, len(body))
        return Loaded(header.start, records, header)

    def fetch_segment(
        self, session_id: str, folder: str, start: int, known: Entry | None = None
    ) -> tuple[Entry, Loaded] | None:
        """The segment starting at ``start`` (``known``: its listed version, if any), or
        ``None`` if there is none."""
        if known is not None:
            try:
                return known, self.fetch(session_id, known)
            except Gone:
                pass
        key = Layout.segment_key(folder, start)
        got = self.bucket.get(key)
        if got is None:
            return None
        body, etag = got
        entry = Entry(key, etag, len(body), "seg", start)
        try:
            header, records = frames.decode(body)
        except frames.FrameError as exc:
            raise CorruptRecord(session_id, start, f"object {key}: {exc}") from None
        self._check(session_id, entry, header)
        self.remember(entry, header, records, len(body))
        return entry, Loaded(header.start, records, header)

    def remember(
        self, entry: Entry, header: frames.Header, records: list[Record], size: int
    ) -> None:
        """Cache an object this handle read or wrote itself."""
        self._bodies.put(entry.key, entry.etag, (header, records), size)
        self._headers.put(entry.key, entry.etag, header, header.count + 1)

    def remember_contents(self, entry: Entry, table: Contents, size: int) -> None:
        """Cache a table of contents this handle wrote itself."""
        self._contents.put(entry.key, entry.etag, table, size)

    @staticmethod
    def _check(session_id: str, entry: Entry, header: frames.Header) -> None:
        if header.start != entry.start or (entry.end is not None and header.end != entry.end):
            raise CorruptRecord(
                session_id,
                entry.start,
                f"object {entry.key} holds positions {header.start}..{header.end - 1}, "
                "not what its key says",
            )

    def _fetch_range(self, session_id: str, entry: Entry, want: int) -> Loaded:
        """A large chunk's records from ``want`` on, through ranged GETs."""
        header = self.header(session_id, entry)
        index = want - header.start
        first, last = header.offsets[index], header.offsets[-1]
        data = b""
        if last > first:
            try:
                got = self.bucket.get(entry.key, etag=entry.etag, first=first, last=last - 1)
            except Changed:
                raise Gone(entry.key) from None
            if got is None or len(got[0]) != last - first:
                raise CorruptRecord(session_id, want, f"object {entry.key} is truncated")
            data = got[0]
        records = header.records(memoryview(data), index, header.count, base=first)
        return Loaded(want, records, header)

    def header(self, session_id: str, entry: Entry) -> frames.Header:
        """The header of ``entry`` (cached; a ranged GET or two the first time)."""
        cached = self._headers.get(entry.key, entry.etag)
        if cached is not None:
            return cached
        try:
            got = self.bucket.get(
                entry.key, etag=entry.etag, first=0, last=frames.HEADER_PROBE_BYTES - 1
            )
            if got is None:
                raise Gone(entry.key)
            prefix = got[0]
            parsed = frames.parse_header(prefix)
            if isinstance(parsed, int) and len(prefix) >= frames.HEADER_PROBE_BYTES:
                more = self.bucket.get(
                    entry.key, etag=entry.etag, first=len(prefix), last=parsed - 1
                )
                if more is None:
                    raise Gone(entry.key)
                parsed = frames.parse_header(prefix + more[0])
            if isinstance(parsed, int):
                raise frames.FrameError("truncated header")
            if parsed.size != entry.size:
                raise frames.FrameError(f"{entry.size} bytes where the header says {parsed.size}")
        except Changed:
            raise Gone(entry.key) from None
        except frames.FrameError as exc:
            raise CorruptRecord(session_id, entry.start, f"object {entry.key}: {exc}") from None
        self._check(session_id, entry, parsed)
        self._headers.put(entry.key, entry.etag, parsed, parsed.count + 1)
        return parsed

    def together(self, first: Callable[[], A], second: Callable[[], B]) -> tuple[A, B]:
        """Run two calls at once (the second on a fetching thread); their results."""
        future = self._executor().submit(second)
        try:
            one = first()
        except BaseException:
            wait([future])  # leave nothing running behind an error
            raise
        return one, future.result()

    def fetch_many(
        self, session_id: str, wanted: Sequence[tuple[Entry, int | None]]
    ) -> dict[str, Loaded | BaseException]:
        """:meth:`fetch` several objects in parallel; results (or the error each raised)
        by key."""
        unique = list({entry.key: (entry, want) for entry, want in wanted}.values())
        results: dict[str, Loaded | BaseException] = {}
        if len(unique) <= 1:
            for entry, want in unique:
                try:
                    results[entry.key] = self.fetch(session_id, entry, want)
                except (Gone, CorruptRecord) as exc:
                    results[entry.key] = exc
            return results
        pool = self._executor()
        futures = [
            (entry.key, pool.submit(self.fetch, session_id, entry, want)) for entry, want in unique
        ]
        for key, future in futures:
            try:
                results[key] = future.result()
            except (Gone, CorruptRecord) as exc:
                results[key] = exc
        return results

    def contents(self, session_id: str, entry: Entry) -> Contents | None:
        """The table of contents ``entry`` (cached), or ``None`` if it is unreadable (tables
        of contents are derived data: the log is readable without them). Raises
        :class:`Gone` if it is no longer there (a newer one replaced it)."""
        cached = self._contents.get(entry.key, entry.etag)
        if cached is not None:
            return cached
        try:
            got = self.bucket.get(entry.key, etag=entry.etag or None)
        except Changed:
            raise Gone(entry.key) from None
        if got is None:
            raise Gone(entry.key)
        try:
            table = Contents.decode(got[0])
        except ContentsError:
            return None
        if table.end != entry.end:
            return None
        self._contents.put(entry.key, entry.etag, table, len(got[0]))
        return table
