"""EncryptedStore: a wrapper backend that encrypts record data on its way into any store.

Opened by URL, ``encrypted+<inner URL>``: the inner store is opened normally (its URL and
the options this wrapper does not take) and the wrapper sees only its hooks::

    store = open_store("encrypted+s3://bucket/chats?endpoint_url=...", keys="k1:...")

What is encrypted: every record's data (messages, tool calls, control records). What is not:
session ids, record ids, the number and order of records, their sizes, and timing: the
inner store needs ids to keep retries idempotent and to list sessions. See SECURITY.md.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

from chatkeep.core import Store
from chatkeep.core.backend import FULLTEXT, InvalidOption, Record

from .config import Keyring
from .errors import DecryptionError
from .keycheck import KeyCheck
from .layout import MAGIC, Cipher

__all__ = ["EncryptedStore"]


class EncryptedStore:
    """Encrypts each record's data with AES-256-GCM, bound to its session and record id.

    ``inner``: the store underneath (a :class:`~chatkeep.core.Store`). ``keys``: a
    ``"key_id:key,..."`` str or a mapping (default: ``CHATKEEP_ENCRYPTION_KEYS``); the first
    key encrypts, all decrypt. ``allow_plaintext``: read records that are not encrypted as
    they are (for a store that held data before encryption was turned on; off by default,
    since otherwise anyone who can write to the inner store could inject records).

    The capabilities are the inner store's, except ``fulltext``: the wrapper adds none
    and loses only that one. A full-text index holds the words of each message, in
    plaintext, so an encrypted store never keeps one; a search decrypts and scans (the inner
    store's own index, handed the ciphertext, finds nothing in it). See SECURITY.md.
    """

    def __init__(self, inner: Store, *, keys: object = None, allow_plaintext: bool = False) -> None:
        if not isinstance(inner, Store):
            raise InvalidOption(f"inner must be a chatkeep Store, not {type(inner).__name__}")
        if not isinstance(allow_plaintext, bool):
            raise InvalidOption("allow_plaintext must be True or False")
        self.keyring = Keyring.from_option(keys)
        self.cipher = Cipher(self.keyring)
        self.keycheck = KeyCheck(self.cipher)
        self.inner = inner
        self.allow_plaintext = allow_plaintext
        self.capabilities = inner.capabilities - {FULLTEXT}
        damage = getattr(inner.backend, "chatkeep_damage", None)
        if damage is not None:  # the conformance suite's damage hook reaches the inner store
            self.chatkeep_damage = damage
        expiry = getattr(inner.backend, "chatkeep_expiry", None)
        if expiry is not None:  # and its expiry hook (session ids are not encrypted)
            self.chatkeep_expiry = expiry
        set_updated = getattr(inner.backend, "chatkeep_set_updated", None)
        if set_updated is not None:  # and the hook that makes ties in recent
            self.chatkeep_set_updated = set_updated
        tidy = getattr(inner.backend, "chatkeep_tidy", None)
        if tidy is not None:  # and its clean-up hook
            self.chatkeep_tidy = tidy

    @classmethod
    def wrap(
        cls,
        open_inner: Callable[..., Store],
        *,
        keys: object = None,
        allow_plaintext: object = False,
        **inner_options: Any,
    ) -> EncryptedStore:
        """What ``open_store("encrypted+<inner URL>", **options)`` calls: ``keys`` and
        ``allow_plaintext`` are the wrapper's, every other option goes to the inner store.

        Keys are checked before the inner store is opened, so a bad key opens nothing.
        """
        keyring = Keyring.from_option(keys)
        if isinstance(allow_plaintext, str):  # from a URL query, via a wrapper of wrappers
            allow_plaintext = allow_plaintext.lower() in ("1", "true", "yes")
        if not isinstance(allow_plaintext, bool):
            raise InvalidOption("allow_plaintext must be True or False")
        return cls(open_inner(**inner_options), keys=keyring, allow_plaintext=allow_plaintext)

    def __repr__(self) -> str:
        return f"<EncryptedStore inner={self.inner!r} keys={list(self.keyring.key_ids)!r}>"

    # -- sealing and opening -------------------------------------------------------------

    def _seal(self, session_id: str, records: list[Record]) -> list[Record]:
        seal = self.cipher.seal
        return [Record(record.id, seal(session_id, record.id, record.data)) for record in records]

    def _open(self, session_id: str, records: list[Record], start: int) -> list[Record]:
        opened: list[Record] = []
        open_ = self.cipher.open
        for offset, record in enumerate(records):
            if self.allow_plaintext and not record.data.startswith(MAGIC):
                opened.append(record)
                continue
            try:
                opened.append(Record(record.id, open_(session_id, record.id, record.data).data))
            except ValueError as problem:
                raise DecryptionError(
                    session_id, self._position(session_id, start, offset), str(problem), record.id
                ) from None
        return opened

    def _position(self, session_id: str, start: int, offset: int) -> int:
        """The absolute position of the record ``offset`` into a read from ``start`` (the
        error path only: a tail read needs the log's length, found in O(log n) reads)."""
        if start >= 0:
            return start + offset
        length = _length(self.inner, session_id)
        return max(length + start, 0) + offset

    # -- the hooks -----------------------------------------------------------------------

    def append(self, session_id: str, records: list[Record]) -> None:
        """Encrypt and append (an exact retry seals to the same bytes: still a no-op).

        Raises :class:`~chatkeep.encrypted.KeyMismatch`, storing nothing, when this
        handle's keys cannot open what the store already holds (see ``keycheck``).
        """
        sealed = self._seal(session_id, records)
        self._check_keys(session_id)
        self.inner.append(session_id, sealed)
        self.keycheck.known(session_id)

    async def aappend(self, session_id: str, records: list[Record]) -> None:
        """Async :meth:`append`."""
        sealed = self._seal(session_id, records)
        await self._acheck_keys(session_id)
        await self.inner.aappend(session_id, sealed)
        self.keycheck.known(session_id)

    def append_if(self, session_id: str, records: list[Record], after: str | None) -> None:
        """Encrypt and append conditionally (the condition is on record ids, in the clear)."""
        sealed = self._seal(session_id, records)
        self._check_keys(session_id)
        self.inner.append_if(session_id, sealed, after=after)
        self.keycheck.known(session_id)

    async def aappend_if(self, session_id: str, records: list[Record], after: str | None) -> None:
        """Async :meth:`append_if`."""
        sealed = self._seal(session_id, records)
        await self._acheck_keys(session_id)
        await self.inner.aappend_if(session_id, sealed, after=after)
        self.keycheck.known(session_id)

    def read(self, session_id: str, start: int = 0, stop: int | None = None) -> list[Record]:
        """Read and decrypt; a record that does not open raises :class:`DecryptionError`."""
        return self._opened(session_id, self.inner.read(session_id, start, stop), start)

    async def aread(self, session_id: str, start: int = 0, stop: int | None = None) -> list[Record]:
        """Async :meth:`read`."""
        records = await self.inner.aread(session_id, start, stop)
        return self._opened(session_id, records, start)

    def _opened(self, session_id: str, records: list[Record], start: int) -> list[Record]:
        opened = self._open(session_id, records, start)
        if any(record.data.startswith(MAGIC) for record in records):
            self.keycheck.known(session_id)  # these keys open this session: no check needed
        return opened

    # -- the key check before a write (bounded: see keycheck) ------------------------------

    def _check_keys(self, session_id: str) -> None:
        check = self.keycheck
        if not check.needed(session_id):
            return
        if check.check(session_id, session_id, self.inner.read(session_id, -1)):
            return
        if not check.store_checked:
            newest = self._newest_session(session_id)
            if newest is not None:
                check.check(session_id, newest, self.inner.read(newest, -1))
            check.store_checked = True

    async def _acheck_keys(self, session_id: str) -> None:
        check = self.keycheck
        if not check.needed(session_id):
            return
        if check.check(session_id, session_id, await self.inner.aread(session_id, -1)):
            return
        if not check.store_checked:
            newest = await self._anewest_session(session_id)
            if newest is not None:
                check.check(session_id, newest, await self.inner.aread(newest, -1))
            check.store_checked = True

    def _newest_session(self, other_than: str) -> str | None:
        """The store's most recently appended session (or its first listed one), one page."""
        if self.inner.supports("recent"):
            page = self.inner.recent_page(None, None, 2)
            return next((s for s, _ in page if s != other_than), None)
        if self.inner.supports("list_sessions"):
            listing = self.inner.list_sessions()
            try:
                return next((s for s in listing if s != other_than), None)
            finally:
                close = getattr(listing, "close", None)
                if close is not None:
                    close()
        return None

    async def _anewest_session(self, other_than: str) -> str | None:
        if self.inner.supports("recent"):
            page = await self.inner.arecent_page(None, None, 2)
            return next((s for s, _ in page if s != other_than), None)
        if self.inner.supports("list_sessions"):
            listing = self.inner.alist_sessions()
            try:
                async for session_id in listing:
                    if session_id != other_than:
                        return session_id
            finally:
                aclose = getattr(listing, "aclose", None)
                if aclose is not None:
                    await aclose()
        return None

    def delete(self, session_id: str) -> None:
        """The inner store's delete."""
        self.inner.delete(session_id)

    async def adelete(self, session_id: str) -> None:
        """Async :meth:`delete`."""
        await self.inner.adelete(session_id)

    def list_sessions(self, prefix: str | None = None) -> Iterator[str]:
        """The inner store's listing (session ids are not encrypted)."""
        return self.inner.list_sessions(prefix)

    async def alist_sessions(self, prefix: str | None = None) -> AsyncIterator[str]:
        """Async :meth:`list_sessions`."""
        async for session_id in self.inner.alist_sessions(prefix):
            yield session_id

    def recent_sessions(
        self, prefix: str | None, before: tuple[float, str] | None, limit: int
    ) -> list[tuple[str, float]]:
        """The inner store's ``recent`` index, page by page (session ids are not
        encrypted, and the times are the inner store's)."""
        return self.inner.recent_page(prefix, before, limit)

    async def arecent_sessions(
        self, prefix: str | None, before: tuple[float, str] | None, limit: int
    ) -> list[tuple[str, float]]:
        """Async :meth:`recent_sessions`."""
        return await self.inner.arecent_page(prefix, before, limit)

    def close(self) -> None:
        """Close the inner store."""
        self.inner.close()

    async def aclose(self) -> None:
        """Async :meth:`close`."""
        await self.inner.aclose()


def _length(store: Store, session_id: str) -> int:
    """The number of records in a log, by exponential then binary search of one-record
    reads (the contract has no length call)."""
    if not store.read(session_id, 0, 1):
        return 0
    low, high = 1, 2  # a record exists at low - 1
    while store.read(session_id, high - 1, high):
        low, high = high, high * 2
    while high - low > 1:
        middle = (low + high) // 2
        if store.read(session_id, middle - 1, middle):
            low = middle
        else:
            high = middle
    return low
