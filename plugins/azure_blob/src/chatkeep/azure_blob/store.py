""":class:`AzureBlobStore`: chatkeep session logs in Azure Blob Storage append blobs.

Open it by URL through the core::

    from chatkeep.core import open_store

    store = open_store("azblob://chats/prod?account_url=https://acct.blob.core.windows.net"
                       "&credential=default")
    store.append("session-1", [("m1", b"hello")])
    store.read("session-1", start=-50)

Every method has a native async twin (``aappend``, ``aread``, ...) on
``azure.storage.blob.aio``. See the package README for the layout, limits and costs.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import AsyncIterator, Coroutine, Iterator
from contextlib import AbstractContextManager
from typing import Any, ClassVar, TypeVar

from azure.core.exceptions import AzureError

from chatkeep.core import LoopThread, Record

from . import _read, _write
from ._drivers import AsyncDriver, SyncDriver
from ._operations import (
    BlobMissing,
    OutcomeUnknown,
    ServiceError,
    Step,
    head,
    list_top,
    run_async,
    run_sync,
)
from ._state import ABSENT, Log, SessionCache, Unsettled, session_id_from_metadata
from .config import SCHEME, Settings, parse_settings
from .errors import AzureBlobConfigError
from .faults import Where, mapped, translate
from .layout import (
    MARKER,
    decode_folder,
    encode_prefix,
    encode_session_id,
    is_hashed,
    legacy_folder,
    segment_name,
    segment_number,
)
from .plugin import CAPABILITIES

__all__ = ["LEGACY_CHECK_PAGE", "LOGGER", "AzureBlobStore"]

T = TypeVar("T")

#: The plugin's logger: the layout-1 warning goes here.
LOGGER = logging.getLogger("chatkeep.azure_blob")
#: Sessions per List Blobs page of ``list_sessions`` (the service's maximum, 5,000). The
#: repository's conformance run lowers it so its listing test crosses page boundaries with
#: a few hundred sessions instead of more than 5,000.
LISTING_PAGE = 5000
#: Entries of the one listing page the layout-1 check reads.
LEGACY_CHECK_PAGE = 20
#: At most this many folders of that page are confirmed (one Get Blob Properties each).
LEGACY_CHECK_CONFIRM = 3


class AzureBlobStore:
    """Session logs as append blobs in one container, under an optional name prefix.

    ``container`` and ``prefix`` say where; the keyword options (also accepted in the
    ``azblob://`` URL's query string) say how to authenticate and tune limits:

    - ``connection_string=`` (or the ``AZURE_STORAGE_CONNECTION_STRING`` variable), or
    - ``account_url=`` with ``account_key=``, ``sas_token=`` or ``credential=`` (an
      azure-identity credential object, or ``"default"`` for ``DefaultAzureCredential``;
      ``async_credential=`` gives the async twin of a custom credential);
    - ``api_version=``, ``create_container=`` (default true), ``retries=``,
      ``retry_backoff=``, ``timeout=``, ``connect_timeout=``, ``contention_timeout=``,
      ``segment_blocks=``, ``segment_bytes=``, ``max_block_bytes=``, ``cache_sessions=``,
      ``resend_check=`` (``"session"``, the default, or ``"recent"``: see the README);
    - ``namespace=``: the store's tenant (``acme``, ``acme/eu``): no handle reads, lists,
      forks into or deletes anything outside its own namespace, nested ones included;
    - ``layout=``: ``2`` (the default) or ``1``, the blob names every release before
      layout 2 wrote (no namespaces; see the README's *Upgrading from layout 1*). A
      layout-2 handle that finds its namespace or a session empty checks once whether
      layout-1 blobs sit under its prefix, and if so logs a warning: see
      :meth:`legacy_layout_found`;
    - ``transport=`` / ``async_transport=``: custom azure-core transports (tests, proxies).
    """

    capabilities: ClassVar[frozenset[str]] = CAPABILITIES

    def __init__(self, container: str, prefix: str = "", **options: Any) -> None:
        self._settings: Settings = parse_settings(
            None, {"container": container, "prefix": prefix, **options}
        )
        self._setup()

    @classmethod
    def from_url(cls, url: str, **options: Any) -> AzureBlobStore:
        """Open ``azblob://CONTAINER[/PREFIX][?option=value...]`` (options as keywords win)."""
        store = cls.__new__(cls)
        store._settings = parse_settings(url, options)
        store._setup()
        return store

    def _setup(self) -> None:
        settings = self._settings
        self._cache = SessionCache(settings.cache_sessions, settings.limits.seen_ids)
        self._lock = threading.Lock()
        self._sync: SyncDriver | None = None
        self._async: AsyncDriver | None = None
        self._loop = LoopThread("azure-blob")
        # The layout-1 check: "due" until it ran (or is running), then its answer.
        self._legacy_due = settings.layout == 2
        self._legacy_found = False

    # -- description ------------------------------------------------------------------

    @property
    def url(self) -> str:
        """The store's location as a URL without any option (so without secrets)."""
        prefix = self._settings.root.rstrip("/")
        return f"{SCHEME}://{self._settings.container}" + (f"/{prefix}" if prefix else "")

    def __repr__(self) -> str:
        settings = self._settings
        namespace = "" if settings.namespace is None else f" namespace={settings.namespace!r}"
        if settings.layout != 2:
            namespace += f" layout={settings.layout}"
        return (
            f"<AzureBlobStore {self.url}{namespace} endpoint={settings.endpoint!r} "
            f"auth={settings.auth!r}>"
        )

    # -- plumbing ---------------------------------------------------------------------

    def _log(self, session_id: str) -> Log:
        folder = self._settings.base + encode_session_id(session_id)
        seen = self._cache.seen(session_id)
        limits = self._settings.limits
        index = self._cache.index(session_id) if limits.resend_check == "session" else None
        return Log(
            session_id,
            folder,
            seen,
            limits,
            self._settings.create_container,
            index,
            shared_folder=self._settings.layout == 1,
        )

    def _sync_driver(self) -> SyncDriver:
        driver = self._sync
        if driver is not None:
            return driver
        if not self._settings.sync_available:
            raise AzureBlobConfigError(
                "this store was given only an async credential: use the async API "
                "(aappend, aread, ...) or also pass a sync credential="
            )
        with self._lock:
            if self._sync is None:
                self._sync = SyncDriver(self._settings.sync_container())
            return self._sync

    def _async_driver(self) -> AsyncDriver:
        with self._lock:
            if self._async is None:
                self._async = AsyncDriver(self._settings.async_container())
            return self._async

    def _run(self, step: Step[T]) -> T:
        return run_sync(step, self._sync_driver().execute)

    async def _arun(self, step: Step[T]) -> T:
        # The aio client lives on the store's own event loop thread: its aiohttp session is
        # bound to the loop that created it, and a store outlives callers' loops (each
        # asyncio.run() makes a new one). Callers await it without blocking their loop.
        return await self._on_loop(run_async(step, self._async_driver().execute))

    async def _on_loop(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return await asyncio.wrap_future(self._loop.submit(coroutine))

    def _errors(self, session_id: str | None, action: str) -> AbstractContextManager[None]:
        """Turn internal failures into chatkeep's typed errors (without secrets): the one
        table of :mod:`.faults`; an unsettled append is remembered for the next one."""
        settings = self._settings
        where = Where(
            action,
            session_id,
            settings.endpoint,
            settings.auth,
            settings.container,
            settings.limits.contention_timeout,
        )

        def unsettled(error: Unsettled) -> None:
            if session_id is not None:
                self._cache.remember(session_id, error.cursor)
                self._cache.unsettled(session_id, error.attempt)

        return mapped(where, unsettled)

    # -- the two hooks ----------------------------------------------------------------

    def append(self, session_id: str, records: list[Record]) -> None:
        """Append ``records`` atomically (one Append Block call in the common case)."""
        attempts = self._cache.attempts(session_id)
        with self._errors(session_id, "append"):
            cursor = self._run(
                _write.append(
                    self._log(session_id), self._cache.cursor(session_id), records, attempts
                )
            )
        self._cache.remember(session_id, cursor)
        self._cache.settled(session_id, attempts)

    async def aappend(self, session_id: str, records: list[Record]) -> None:
        """Async :meth:`append`."""
        if not self._settings.async_available:
            await asyncio.to_thread(self.append, session_id, records)
            return
        attempts = self._cache.attempts(session_id)
        with self._errors(session_id, "append"):
            cursor = await self._arun(
                _write.append(
                    self._log(session_id), self._cache.cursor(session_id), records, attempts
                )
            )
        self._cache.remember(session_id, cursor)
        self._cache.settled(session_id, attempts)

    def append_if(self, session_id: str, records: list[Record], after: str | None) -> None:
        """Append only if the session's last record is ``after`` (``None``: empty), else
        raise :class:`~chatkeep.core.AppendConflict`: a ranged read of the end, then one
        Append Block conditioned on exactly that end."""
        attempts = self._cache.attempts(session_id)
        with self._errors(session_id, "append"):
            cursor = self._run(
                _write.append_if(
                    self._log(session_id), self._cache.cursor(session_id), records, after, attempts
                )
            )
        self._cache.remember(session_id, cursor)
        self._cache.settled(session_id, attempts)

    async def aappend_if(self, session_id: str, records: list[Record], after: str | None) -> None:
        """Async :meth:`append_if`."""
        if not self._settings.async_available:
            await asyncio.to_thread(self.append_if, session_id, records, after)
            return
        attempts = self._cache.attempts(session_id)
        with self._errors(session_id, "append"):
            cursor = await self._arun(
                _write.append_if(
                    self._log(session_id), self._cache.cursor(session_id), records, after, attempts
                )
            )
        self._cache.remember(session_id, cursor)
        self._cache.settled(session_id, attempts)

    def read(self, session_id: str, start: int = 0, stop: int | None = None) -> list[Record]:
        """``log[start:stop]``: a tail read fetches only the segment's last bytes."""
        with self._errors(session_id, "read"):
            records, cursor = self._run(
                _read.read(self._log(session_id), self._cache.cursor(session_id), start, stop)
            )
        self._cache.remember(session_id, cursor)
        if cursor is ABSENT and self._legacy_due:
            self._legacy_check_sync()
        return records

    async def aread(self, session_id: str, start: int = 0, stop: int | None = None) -> list[Record]:
        """Async :meth:`read`."""
        if not self._settings.async_available:
            return await asyncio.to_thread(self.read, session_id, start, stop)
        with self._errors(session_id, "read"):
            records, cursor = await self._arun(
                _read.read(self._log(session_id), self._cache.cursor(session_id), start, stop)
            )
        self._cache.remember(session_id, cursor)
        if cursor is ABSENT and self._legacy_due:
            await self._legacy_check_async()
        return records

    # -- the layout-1 check -----------------------------------------------------------

    def legacy_layout_found(self) -> bool:
        """Whether blobs of layout 1 (what releases before layout 2 wrote) sit directly
        under this layout-2 handle's prefix, where it does not read them.

        The check runs once per handle: on the first read that finds a session empty,
        the first unfiltered listing that finds the namespace empty, or this call,
        whichever comes first (one List Blobs request of :data:`LEGACY_CHECK_PAGE`
        entries, plus one Get Blob Properties per folder it confirms, at most
        :data:`LEGACY_CHECK_CONFIRM`). When it finds them it logs a warning on
        :data:`LOGGER` naming ``layout=1`` and the migration. Always ``False`` on a
        ``layout=1`` handle, and while the check has not run or could not reach the
        service (it then runs again next time).
        """
        if self._legacy_due:
            self._legacy_check_sync()
        return self._legacy_found

    async def alegacy_layout_found(self) -> bool:
        """Async :meth:`legacy_layout_found`."""
        if self._legacy_due:
            await self._legacy_check_async()
        return self._legacy_found

    def _legacy_claim(self) -> bool:
        """Take the check (``False`` if it ran or another call is running it)."""
        with self._lock:
            due, self._legacy_due = self._legacy_due, False
            return due

    def _legacy_check_sync(self) -> None:
        if self._legacy_claim():
            if self._settings.sync_available:
                self._legacy_settle(self._run(self._legacy_step()))
            else:
                running = run_async(self._legacy_step(), self._async_driver().execute)
                self._legacy_settle(self._loop.submit(running).result())

    async def _legacy_check_async(self) -> None:
        if self._legacy_claim():
            if self._settings.async_available:
                self._legacy_settle(await self._arun(self._legacy_step()))
            else:
                self._legacy_settle(await asyncio.to_thread(self._run, self._legacy_step()))

    def _legacy_settle(self, found: bool | None) -> None:
        """Record the check's answer (``None``: the service could not be reached, so the
        check is due again) and warn once when layout-1 blobs were found."""
        if found is None:
            with self._lock:
                self._legacy_due = True
            return
        self._legacy_found = found
        if found:
            LOGGER.warning(
                "%s holds chatkeep sessions in blob layout 1 (written by releases before "
                "layout 2), which this store does not read. Open it with the option "
                "layout=1 to read them, or copy them to layout 2 once with "
                "chatkeep.core.transfer.migrate(open_store(URL + '?layout=1'), "
                "open_store(URL)) (URL with your credentials); see the chatkeep-azure-blob "
                "README, 'Upgrading from layout 1'.",
                self.url,
            )

    def _legacy_step(self) -> Step[bool | None]:
        """One listing page directly under the prefix; a folder there that is a session-id
        encoding (not ``chatkeep-v2``) and holds a segment 0 is a layout-1 session."""
        root = self._settings.root
        try:
            names = yield from list_top(root, LEGACY_CHECK_PAGE)
        except OutcomeUnknown:
            return None
        except ServiceError:  # no container, or no permission to list: nothing to say
            return False
        folders = [folder for folder in (legacy_folder(root, name) for name in names) if folder]
        for folder in folders[:LEGACY_CHECK_CONFIRM]:
            try:
                yield from head(segment_name(root + folder, 0))
            except OutcomeUnknown:
                return None
            except ServiceError:
                continue  # a folder of something else (a nested store, other data)
            return True
        return False

    # -- optional capabilities --------------------------------------------------------

    def chatkeep_durability(self) -> str:
        """``"power"`` (a test hook of ``chatkeep.testing``): the service acknowledges an
        Append Block once the account's replication has stored it."""
        return "power"

    def chatkeep_storage_contains(self, data: bytes) -> bool:
        """Whether ``data`` occurs in any blob this handle writes to (every blob under its
        prefix and namespace): a test hook of ``chatkeep.testing``."""
        container = self._sync_driver().container
        with self._errors(None, "chatkeep_storage_contains"):
            try:
                names = list(container.list_blob_names(name_starts_with=self._settings.base))
            except AzureError as error:
                translated = translate(error)
                if isinstance(translated, BlobMissing):
                    return False
                raise translated from None
            for name in names:
                content = container.get_blob_client(name).download_blob().readall()
                if data in content:
                    return True
        return False

    def chatkeep_damage(self, session_id: str, position: int, kind: str) -> None:
        """Damage the frame holding record ``position`` behind the store's back: a test
        hook of ``chatkeep.testing``. ``"garbage"`` overwrites the frame's bytes with random
        ones, ``"truncated"`` cuts it to half its length, ``"missing"`` removes it; the
        segment is rewritten (same name and metadata) with the rest of its bytes intact.
        This handle forgets what it knew of the session, as a fresh handle would."""
        if kind not in ("garbage", "truncated", "missing"):
            raise NotImplementedError(kind)
        import os

        from . import frames as fmt

        container = self._sync_driver().container
        log = self._log(session_id)
        with self._errors(session_id, "chatkeep_damage"):
            names = sorted(
                name
                for name in container.list_blob_names(name_starts_with=log.folder_path + "/")
                if segment_number(name) is not None
            )
            for name in names:
                client = container.get_blob_client(name)
                content = client.download_blob().readall()
                for frame in fmt.scan_forward(content, 0, 0, lenient=True).frames:
                    if frame.kind != fmt.KIND_RECORDS or not frame.first <= position < frame.total:
                        continue
                    piece = content[frame.start : frame.end]
                    if kind == "garbage":
                        piece = os.urandom(len(piece))
                    elif kind == "truncated":
                        piece = piece[: len(piece) // 2]
                    else:
                        piece = b""
                    damaged = content[: frame.start] + piece + content[frame.end :]
                    metadata = client.get_blob_properties().metadata
                    client.delete_blob()
                    client.create_append_blob(metadata=metadata)
                    limit = self._settings.limits.max_block
                    for offset in range(0, len(damaged), limit):
                        client.append_block(damaged[offset : offset + limit])
                    self._cache.forget(session_id)
                    return
        raise ValueError(f"session {session_id!r} has no record at position {position}")

    def delete(self, session_id: str) -> None:
        """Delete every blob of the session (segments and oversized batches)."""
        self._cache.forget(session_id)
        with self._errors(session_id, "delete"):
            self._run(_write.delete(self._log(session_id)))
        self._cache.forget(session_id)

    async def adelete(self, session_id: str) -> None:
        """Async :meth:`delete`."""
        if not self._settings.async_available:
            await asyncio.to_thread(self.delete, session_id)
            return
        self._cache.forget(session_id)
        with self._errors(session_id, "delete"):
            await self._arun(_write.delete(self._log(session_id)))
        self._cache.forget(session_id)

    def _listing_start(self, prefix: str | None) -> str:
        return self._settings.base + encode_prefix(prefix or "")

    def _session_of(self, item_name: str, prefix: str | None) -> str | tuple[str] | None:
        """The session id a listed folder encodes, ``None`` to skip it, or ``(folder,)`` when
        the id must be read from the folder's segment metadata (hashed names)."""
        if not item_name.endswith("/"):
            return None
        base = self._settings.base
        if not item_name.startswith(base):
            return None
        folder = item_name[len(base) : -1]
        if is_hashed(folder) or (folder == MARKER and self._settings.layout == 1):
            # Layout 1: "chatkeep-v2/" is layout 2's tree unless a session of that name
            # has a segment there (its metadata names it).
            return (folder,)
        session_id = decode_folder(folder)
        if session_id is None or (prefix and not session_id.startswith(prefix)):
            return None
        return session_id

    def _hashed_step(self, folder: str, prefix: str | None) -> Step[str | None]:
        try:
            blob = yield from head(segment_name(self._settings.base + folder, 0))
        except BlobMissing:
            return None
        session_id = session_id_from_metadata(blob.metadata)
        if session_id is None or encode_session_id(session_id) != folder:
            return None
        if prefix and not session_id.startswith(prefix):
            return None
        return session_id

    def list_sessions(self, prefix: str | None = None) -> Iterator[str]:
        """Yield stored session ids (starting with ``prefix``), one listing page at a time."""
        with self._errors(None, "list_sessions"):
            container = self._sync_driver().container
            pages = container.walk_blobs(
                name_starts_with=self._listing_start(prefix),
                delimiter="/",
                results_per_page=LISTING_PAGE,
            )
        iterator = iter(pages)
        listed = False
        while True:
            with self._errors(None, "list_sessions"):
                try:
                    item = next(iterator)
                except StopIteration:
                    if not listed and not prefix and self._legacy_due:
                        self._legacy_check_sync()
                    return
                except AzureError as error:
                    translated = translate(error)
                    if isinstance(translated, BlobMissing):  # no container: no sessions
                        if not listed and not prefix and self._legacy_due:
                            self._legacy_check_sync()
                        return
                    raise translated from None
                found = self._session_of(str(getattr(item, "name", "")), prefix)
                if isinstance(found, tuple):
                    found = self._run(self._hashed_step(found[0], prefix))
            if found is not None:
                listed = True
                yield found

    async def alist_sessions(self, prefix: str | None = None) -> AsyncIterator[str]:
        """Async :meth:`list_sessions`."""
        if not self._settings.async_available:
            iterator = iter(await asyncio.to_thread(self.list_sessions, prefix))
            done = object()
            while (item := await asyncio.to_thread(next, iterator, done)) is not done:
                assert isinstance(item, str)
                yield item
            return
        with self._errors(None, "list_sessions"):
            container = self._async_driver().container
            pages = container.walk_blobs(
                name_starts_with=self._listing_start(prefix),
                delimiter="/",
                results_per_page=LISTING_PAGE,
            )
        iterator = pages.__aiter__()
        listed = False
        while True:
            with self._errors(None, "list_sessions"):
                try:
                    item = await self._on_loop(iterator.__anext__())
                except (StopAsyncIteration, AzureError) as error:
                    if isinstance(error, AzureError):
                        translated = translate(error)
                        if not isinstance(translated, BlobMissing):
                            raise translated from None
                    if not listed and not prefix and self._legacy_due:
                        await self._legacy_check_async()
                    return
                found = self._session_of(str(getattr(item, "name", "")), prefix)
                if isinstance(found, tuple):
                    found = await self._arun(self._hashed_step(found[0], prefix))
            if found is not None:
                listed = True
                yield found

    def close(self) -> None:
        """Close the clients and the store's event loop thread (idempotent)."""
        with self._lock:
            sync, self._sync = self._sync, None
            driver, self._async = self._async, None
        if sync is not None:
            sync.close()
        if driver is not None:
            self._loop.submit(driver.close()).result(timeout=30)
        self._close_credentials()
        self._loop.stop()

    async def aclose(self) -> None:
        """Async :meth:`close`."""
        with self._lock:
            sync, self._sync = self._sync, None
            driver, self._async = self._async, None
        if driver is not None:
            await self._on_loop(driver.close())
        if sync is not None:
            await asyncio.to_thread(sync.close)
        await asyncio.to_thread(self._close_credentials)
        await asyncio.to_thread(self._loop.stop)

    def _close_credentials(self) -> None:
        settings = self._settings
        if not settings.owns_credentials:
            return
        if settings.credential is not None:
            settings.credential.close()
        if settings.async_credential is not None and self._loop.started:
            self._loop.submit(settings.async_credential.close()).result(timeout=30)
