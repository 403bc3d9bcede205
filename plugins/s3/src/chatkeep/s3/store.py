"""The S3 backend: each append is one new object; nothing is ever rewritten.

:class:`S3Store` holds the pieces and delegates: :mod:`~chatkeep.s3.reading` reads slices,
:mod:`~chatkeep.s3.appending` appends (the conditional PUT and the id check),
:mod:`~chatkeep.s3.rollover` keeps sessions cheap to open, :mod:`~chatkeep.s3.catalog`
lists and fetches objects, :mod:`~chatkeep.s3.layout` names them.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, ClassVar

from chatkeep.core.backend import InvalidOption, Record, StoreUnavailable
from chatkeep.core.errors import StoreClosed

from .appending import ANY, Appender
from .bucket import Bucket, make_client
from .catalog import Catalog, Entry, Gone
from .config import S3Options, make_options, parse_url
from .contents import CompactionResult, Policy
from .errors import LegacyLayout
from .folder import SessionFolder
from .layout import Layout, decode_session, encode_prefix, hashed_matches, is_hashed
from .legacy import is_legacy_segment, legacy_folder, legacy_keys
from .plugin import CAPABILITIES
from .reading import Observed, Reader, tip_of
from .rollover import RollOver

__all__ = ["S3Store"]

_MAX_FOLDERS = 10_000


class S3Store:
    """Session logs in an S3 bucket (or any S3-compatible store), through boto3.

    ``open_store("s3://my-bucket/chats?region=eu-west-1")``; see the package README for
    every option, the key layout, guarantees and request costs. Thread-safe.
    """

    capabilities: ClassVar[frozenset[str]] = CAPABILITIES

    def __init__(self, bucket: str | S3Options = "", /, **options: Any) -> None:
        if isinstance(bucket, S3Options):
            self.options = make_options(
                {f: getattr(bucket, f) for f in bucket.__dataclass_fields__}, options
            )
        else:
            self.options = make_options({"bucket": bucket}, options)
        self.layout = Layout.create(self.options.prefix, self.options.namespace)
        self._owns_client = self.options.client is None
        self.bucket = Bucket(make_client(self.options), self.options)
        self._executor: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()
        self._closed = False
        self.catalog = Catalog(
            self.bucket,
            cache_bytes=self.options.cache_bytes,
            range_threshold=self.options.range_threshold,
            executor=self._pool,
        )
        self.reader = Reader(
            self.catalog, self.bucket.where, min(1000, self.options.rollover_segments + 3)
        )
        self.appender = Appender(
            self.bucket,
            self.catalog,
            max_conflicts=self.options.max_conflicts,
            rollover_guess=self.options.rollover_segments,
            legacy_check=self._check_legacy,
        )
        self.rollover = RollOver(
            self.bucket,
            self.catalog,
            self.reader,
            Policy(
                self.options.rollover_segments,
                self.options.max_chunk_records,
                self.options.max_chunk_bytes,
            ),
        )
        self._folders: OrderedDict[str, SessionFolder] = OrderedDict()

    @classmethod
    def from_url(cls, url: str, **options: Any) -> S3Store:
        """``s3://bucket/prefix?endpoint_url=...&region=...`` plus keyword options."""
        return cls(parse_url(url, **options))

    def __repr__(self) -> str:
        return f"<S3Store {self.options.describe()}>"

    # -- plumbing -------------------------------------------------------------------------

    def folder(self, session_id: str) -> SessionFolder:
        """This handle's knowledge of one session (created on first use)."""
        with self._lock:
            found = self._folders.get(session_id)
            if found is None:
                found = self._folders[session_id] = SessionFolder(self.layout.folder(session_id))
                if len(self._folders) > _MAX_FOLDERS:
                    self._folders.popitem(last=False)
            else:
                self._folders.move_to_end(session_id)
            return found

    def _pool(self) -> ThreadPoolExecutor:
        with self._lock:
            self._check_open()
            if self._executor is None:
                self._executor = ThreadPoolExecutor(
                    max_workers=self.options.max_workers, thread_name_prefix="chatkeep-s3"
                )
            return self._executor

    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosed("s3")

    def _check_legacy(self, session_id: str, folder: SessionFolder) -> None:
        """Refuse a session the format-1 layout holds (see :mod:`chatkeep.s3.migrate`)."""
        if folder.legacy_checked or not self.options.legacy_check or self.options.namespace:
            return
        old = legacy_folder(self.layout.root, session_id)
        items, _ = self.bucket.list_page(f"{old}seg/", max_keys=1)
        if items and is_legacy_segment(old, items[0].key):
            raise LegacyLayout(session_id, self.bucket.where)
        folder.legacy_checked = True

    # -- read -----------------------------------------------------------------------------

    def read(self, session_id: str, start: int = 0, stop: int | None = None) -> list[Record]:
        """The session's records ``log[start:stop]``: one LIST, then parallel GETs of the
        objects holding them that are not cached."""
        self._check_open()
        folder = self.folder(session_id)
        records, observed = self.reader.read(session_id, folder, start, stop)
        if observed.empty:
            self._check_legacy(session_id, folder)
        self._learn(folder, observed)
        return records

    def _learn(self, folder: SessionFolder, observed: Observed) -> None:
        """Keep what a read saw of the session's end, so the next append is one PUT."""
        with folder.lock:
            if observed.empty:
                if not (folder.known and folder.tip is None and folder.contents is None):
                    folder.forget()
                    folder.known = True
                return
            if not observed.from_top:
                return
            if observed.scan is not None:
                folder.keep_listing(observed.scan)
            if observed.contents is not None and observed.contents[1].end > folder.contents_end:
                folder.contents = observed.contents
            tip = tip_of(observed)
            if tip is None:
                return
            current = folder.tip
            if current is not None and (
                tip.entry.start < current.entry.start
                or (tip.entry.start == current.entry.start and tip.entry.etag != current.entry.etag)
            ):
                folder.forget()  # the session was deleted or rewritten under us
                return
            base = tip.header.base or 0
            if base <= folder.contents_end:
                folder.tip = tip
                folder.extra = {}
                folder.remember(tip.entry)
                folder.known = True
            else:
                folder.known = False  # the table of contents it refers to is still unread

    # -- append ---------------------------------------------------------------------------

    def append(self, session_id: str, records: list[Record]) -> None:
        """Append what is new of ``records`` as one new object at the end of the log.

        One PUT from a handle that knows the end; records already stored with the same data
        are skipped, an id stored with other data raises ``RecordConflict``.
        """
        self._append(session_id, records, ANY)

    def append_if(self, session_id: str, records: list[Record], after: str | None) -> None:
        """Append only if the session's last record id is ``after`` (``None``: empty), in
        the same single conditional PUT; otherwise raise ``AppendConflict``."""
        self._append(session_id, records, after)

    def _append(self, session_id: str, records: list[Record], after: Any) -> None:
        self._check_open()
        folder = self.folder(session_id)
        with folder.lock:
            self._name(session_id, folder)
            if self.appender.append(session_id, folder, records, after):
                self.rollover.after_append(session_id, folder)

    def _name(self, session_id: str, folder: SessionFolder) -> None:
        """Write the ``id`` object of a long session id (once per handle)."""
        if folder.named or not is_hashed(folder.folder[len(self.layout.base) : -1]):
            return
        self.bucket.put(Layout.id_key(folder.folder), session_id.encode("utf-8"))
        folder.named = True

    # -- compaction -----------------------------------------------------------------------

    def compact(
        self,
        session_id: str,
        *,
        max_chunk_records: int | None = None,
        max_chunk_bytes: int | None = None,
    ) -> CompactionResult:
        """Roll the session over up to its end now: merge its newest segments into chunks
        and write a table of contents. Appends do this by themselves every
        ``rollover_segments``; calling it is never needed, and safe at any time::

            store.backend.compact("session-1")
        """
        self._check_open()
        records = self.options.max_chunk_records if max_chunk_records is None else max_chunk_records
        size = self.options.max_chunk_bytes if max_chunk_bytes is None else max_chunk_bytes
        if records < 2 or size < 1:
            raise InvalidOption("max_chunk_records must be at least 2 and max_chunk_bytes positive")
        folder = self.folder(session_id)
        with folder.lock:
            for _ in range(5):
                self.appender.learn(session_id, folder)
                try:
                    return self.rollover.compact(session_id, folder, records, size)
                except Gone:
                    continue  # an object changed under us: learn the end again
        raise StoreUnavailable(
            f"session {session_id!r} kept changing while being compacted; try again"
        )

    # -- delete, list, close --------------------------------------------------------------

    def delete(self, session_id: str) -> None:
        """Erase every object of the session (``DeleteObjects``, 1,000 keys per request)."""
        self._check_open()
        folder = self.folder(session_id)
        with folder.lock:
            for _ in range(5):
                keys = [item.key for item in self.bucket.list_objects(folder.folder)]
                if self.options.legacy_check and self.options.namespace is None:
                    keys += legacy_keys(self.bucket, self.layout.root, session_id)
                if not keys:
                    break
                self.bucket.delete(keys)
            else:
                raise StoreUnavailable(
                    f"objects of session {session_id!r} kept appearing while deleting it"
                )
            folder.forget()
            folder.known = True
            folder.named = False
            folder.legacy_checked = True

    def list_sessions(self, prefix: str | None = None) -> Iterator[str]:
        """Session ids (starting with ``prefix``), lazily, one delimiter LIST per 1,000."""
        self._check_open()
        base = self.layout.base
        for found in self.bucket.list_folders(base + encode_prefix(prefix or "")):
            encoded = found[len(base) : -1]
            session_id: str | None
            if is_hashed(encoded):
                got = self.bucket.get(Layout.id_key(found))
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
        with self._lock:
            if self._closed:
                return
            self._closed = True
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=True)
        self.catalog.clear()
        if self._owns_client:
            self.bucket.close()

    # -- test hooks (chatkeep.testing.hooks) ----------------------------------------------

    def chatkeep_durability(self) -> str:
        """``"power"``: S3 acknowledges a PUT once the object is stored redundantly."""
        return "power"

    def chatkeep_storage_contains(self, data: bytes) -> bool:
        """Whether ``data`` occurs in any object under this store's prefix and namespace."""
        for item in self.bucket.list_objects(self.layout.base):
            got = self.bucket.get(item.key)
            if got is not None and data in got[0]:
                return True
        return False

    def chatkeep_damage(self, session_id: str, position: int, kind: str) -> None:
        """Damage every object holding ``position`` of the session, behind the store's
        back: ``"missing"`` (removed), ``"truncated"`` (cut short) or ``"garbage"``
        (overwritten with random bytes). This handle also drops its cached copies, so it
        sees what any other handle would (a cached copy is a correct one: a handle that
        has cached an object goes on serving it)."""
        if kind not in ("missing", "truncated", "garbage"):
            raise NotImplementedError(kind)
        folder = self.layout.folder(session_id)
        holders: list[str] = []
        for item in self.bucket.list_objects(folder):
            parsed = Layout.parse(folder, item.key)
            if parsed is None or parsed.kind not in ("seg", "chunk"):
                continue
            if parsed.kind == "seg":
                entry = Entry(item.key, item.etag, item.size, "seg", parsed.start)
                end = self.catalog.fetch(session_id, entry).header.end
                start = parsed.start
            else:
                start, end = parsed.start, parsed.end
            if start <= position < end:
                holders.append(item.key)
        for key in holders:
            if kind == "missing":
                self.bucket.delete([key])
                continue
            got = self.bucket.get(key)
            assert got is not None
            body = got[0]
            damaged = body[: len(body) // 2] if kind == "truncated" else os.urandom(len(body))
            self.bucket.put(key, damaged)
        for key in holders:
            self.catalog.discard(key)
        known = self.folder(session_id)
        with known.lock:
            known.forget()
