"""``ChatkeepConversationStore``: Pydantic AI's ``ConversationStore`` on any chatkeep store."""

from __future__ import annotations

import heapq
from collections.abc import Iterator, Sequence
from contextvars import ContextVar
from datetime import timedelta
from typing import Any, TypeVar

from pydantic_ai.agent import AgentRunResult
from pydantic_ai.conversation import Conversation
from pydantic_ai.conversation_store import (
    ConversationConflict,
    ConversationEntry,
    ConversationRecord,
    ConversationStore,
)
from pydantic_ai.exceptions import UserError

from chatkeep.core import Store, check_session_id
from chatkeep.core.adapters import adapter_store, in_thread, native, settled
from chatkeep.core.errors import InvalidOption
from chatkeep.core.views import is_internal_session
from chatkeep.core.views._program import Program, arun, run

from ._log import (
    Head,
    Missing,
    delete_conversation_program,
    entry_program,
    head_program,
    history_program,
    tail_entries,
    write_program,
)
from .convert import fresh_entries, round_trip

__all__ = ["DEFAULT_PREFIX", "ChatkeepConversationStore"]

T = TypeVar("T")

#: The session id of conversation ``C`` is ``DEFAULT_PREFIX + C`` unless ``prefix=`` says.
DEFAULT_PREFIX = "pydantic-ai:"
_MAX_PREFIX = 64
# How many entry ids a store object remembers the session of, and how many conversations'
# last-read ends (up to 16 records each) it keeps.
_REMEMBERED = 65_536
_HEADS_REMEMBERED = 1_024
#: How many entries of whole histories an object keeps decoded, by default (see
#: ``keep_entries=``).
KEEP_ENTRIES = 200_000
# How much earlier than the store's clock a record's updated_at may be, for the newest-first
# listing to stop reading (a record's save time comes from the saving process's clock).
_CLOCK_SKEW = timedelta(seconds=2)
# The save this task is in, as (conversation id, the revision it expects): its first
# read_record may be answered from what this object last read or wrote of the conversation,
# since the write that follows lands only right after that record (a conditional append).
_SAVING: ContextVar[tuple[str, str] | None] = ContextVar("chatkeep_pydantic_ai_save", default=None)


class ChatkeepConversationStore(ConversationStore):
    """Pydantic AI's ``ConversationStore`` kept in a chatkeep store, so that
    ``store.load(...)``, ``agent.run(prompt, conversation=...)``, ``store.save(result)``
    and the UI adapters' ``conversation_store=`` work on SQLite, PostgreSQL, Redis, S3,
    Azure Blob, behind encryption, or on any third-party backend::

        from pydantic_ai import Agent
        from pydantic_ai.conversation import Conversation
        from chatkeep.pydantic_ai import ChatkeepConversationStore

        store = ChatkeepConversationStore(url="sqlite:///chats.db")
        conversation = await store.load("c1") or Conversation(conversation_id="c1")
        result = await agent.run("Hello", conversation=conversation)
        await store.save(result)

    ``url``: a chatkeep store URL, opened here (and closed by :meth:`close`); ``store``: an
    open :class:`~chatkeep.core.Store` to share (left open); neither: ``$CHATKEEP_URL``,
    else the embedded SQLite file. ``prefix``: what the chatkeep session id of each
    conversation starts with (``"pydantic-ai:"``; the rest is the conversation id).

    Each conversation is one chatkeep session whose messages are its current history, so
    ``chatkeep sessions show``, export, migration and search read it like any other.
    """

    def __init__(
        self,
        *,
        url: str | None = None,
        store: Store | None = None,
        prefix: str = DEFAULT_PREFIX,
        keep_entries: int = KEEP_ENTRIES,
    ) -> None:
        if not isinstance(prefix, str) or len(prefix) > _MAX_PREFIX or "\x00" in prefix:
            raise InvalidOption(
                f"ChatkeepConversationStore: prefix= must be a str of at most {_MAX_PREFIX} "
                "characters without NUL"
            )
        if isinstance(keep_entries, bool) or not isinstance(keep_entries, int) or keep_entries < 0:
            raise InvalidOption(
                "ChatkeepConversationStore: keep_entries= must be an int of at least 0"
            )
        self._store, self._owns_store = adapter_store(url, store, owner="ChatkeepConversationStore")
        self._prefix = prefix
        self._closed = False
        # Where this object last saw each entry (entry id -> session id) and what it last
        # read of each conversation's head: hints only, every use checks them against the log.
        self._where: dict[str, str] = {}
        self._heads: dict[str, Head] = {}
        # The whole history this object last loaded or saved of each conversation, decoded
        # (session id -> (its head entry id, its entries)); never handed out, only copies.
        self._kept: dict[str, tuple[str, list[ConversationEntry]]] = {}
        self._kept_count = 0
        self._keep_entries = keep_entries

    # -- properties ------------------------------------------------------------------------

    @property
    def store(self) -> Store:
        """The chatkeep store holding the conversations."""
        return self._store

    @property
    def prefix(self) -> str:
        """What each conversation's chatkeep session id starts with."""
        return self._prefix

    def session_id(self, conversation_id: str) -> str:
        """The chatkeep session holding conversation ``conversation_id`` (raises
        :class:`~chatkeep.core.errors.InvalidSessionId` for an id chatkeep cannot store:
        empty, with NUL, or too long)."""
        if not isinstance(conversation_id, str) or not conversation_id:
            raise InvalidOption("a conversation id must be a non-empty str")
        return check_session_id(self._prefix + conversation_id)

    def __repr__(self) -> str:
        return f"ChatkeepConversationStore(store={self._store!r}, prefix={self._prefix!r})"

    # -- the five primitives ----------------------------------------------------------------

    async def read_record(self, conversation_id: str) -> ConversationRecord | None:
        """The conversation's record, or ``None`` if the store does not have it: one read
        of the end of its log (none for the check :meth:`save` starts with, see there)."""
        session_id = self.session_id(conversation_id)
        saving = _SAVING.get()
        if saving is not None and saving[0] == conversation_id:
            _SAVING.set(None)  # the save's own check, once
            known = self._heads.get(session_id)
            if (
                known is not None
                and known.record is not None
                and known.record.revision == saving[1]
                and self._store.supports("conditional")
            ):
                return known.record
        head = await self._execute(head_program(session_id), ("read",))
        self._remember(session_id, head)
        return head.record

    async def save(
        self, conversation: Conversation | AgentRunResult[Any], *, scope: str | None = None
    ) -> list[ConversationEntry]:
        """Pydantic AI's ``ConversationStore.save``, with one store read fewer: the record
        check it starts with takes the record this object last read or wrote of the
        conversation, when that has the revision the conversation expects and the store
        has the ``conditional`` capability. The write then appends only right after that
        record, so a save that lost a race with another writer still fails with
        ``ConversationConflict`` and stores nothing, as the base class's does."""
        state = (
            conversation.conversation if isinstance(conversation, AgentRunResult) else conversation
        )
        token = None
        if state.revision is not None:
            token = _SAVING.set((state.conversation_id, state.revision))
        try:
            return await super().save(conversation, scope=scope)
        finally:
            if token is not None:
                _SAVING.reset(token)

    async def read_records(
        self, *, scope: str | None = None, limit: int | None = None
    ) -> Sequence[ConversationRecord]:
        """The stored records (those with ``scope``), newest ``updated_at`` first, at most
        ``limit``. On a store with the ``recent`` capability the conversations are read
        newest first from its index of last appends, and the listing stops once no older
        one can make the cut; elsewhere every conversation's record is read."""
        if limit is not None and limit < 0:
            raise UserError("`limit` must not be negative.")
        return await in_thread(self._store, None, self._list, scope, limit)

    async def write_record(
        self,
        record: ConversationRecord,
        *,
        new_entries: Sequence[ConversationEntry] = (),
        expected_revision: str | None,
    ) -> None:
        """Store ``record`` and the ``new_entries`` its history adds, replacing the record
        with ``expected_revision`` (``None``: the conversation must not exist).

        One conditional append on a store with the ``conditional`` capability: the check,
        the entries and the record land together or not at all, whichever processes race;
        the loser gets ``ConversationConflict`` and nothing of its write is stored.
        """
        session_id = self.session_id(record.conversation_id)
        entries = list(new_entries)
        sources = self._sources(record, entries)
        known = self._heads.get(session_id)
        conditional = self._store.supports("conditional")

        def program(found: Sequence[str]) -> Program[Head]:
            return write_program(
                session_id,
                record,
                entries,
                expected_revision,
                sources=[*sources, *found],
                known=known,
                conditional=conditional,
            )

        try:
            head = await self._write(program(()), ("read", "append_if", "append"))
        except Missing as missing:
            # Built on an entry this object has not met: find its conversation, then retry.
            holder = await in_thread(self._store, None, self._search, missing.entry_id, sources)
            if holder is None:
                raise ConversationConflict(record.conversation_id) from None
            try:
                head = await self._write(program([holder]), None)
            except Missing:
                raise ConversationConflict(record.conversation_id) from None
        except ConversationConflict:
            self._heads.pop(session_id, None)
            self._forget(session_id)
            raise
        self._remember(session_id, head, entries)
        self._kept_after_write(session_id, record, entries, expected_revision)

    async def delete_record(self, conversation_id: str, *, expected_revision: str) -> None:
        """Delete the conversation if its revision is still ``expected_revision`` (else
        ``ConversationConflict``). Its log is erased where the store can ``delete``; a fork
        that shares entries with it gets its own copy of them first, so nothing a remaining
        conversation reaches is lost. Elsewhere it is marked deleted and kept."""
        session_id = self.session_id(conversation_id)
        self._heads.pop(session_id, None)
        self._forget(session_id)
        program = delete_conversation_program(
            session_id,
            conversation_id,
            expected_revision,
            conditional=self._store.supports("conditional"),
            erase=self._store.supports("delete"),
        )
        await settled(self._execute(program, None))

    async def read_entry(self, entry_id: str) -> ConversationEntry:
        """The entry with this id (``KeyError`` if the store has none). Found from the
        conversations this object has read or written; an id it has not met is searched
        for in every conversation, newest first."""
        sessions = self._hints(entry_id)
        entry = await self._execute(entry_program(sessions, entry_id), ("read",))
        if entry is None:
            holder = await in_thread(self._store, None, self._search, entry_id, sessions)
            if holder is not None:
                entry = await self._execute(entry_program([holder], entry_id), ("read",))
        if entry is None:
            raise KeyError(entry_id)
        return entry

    async def read_history(
        self, head_id: str | None, *, limit: int | None = None
    ) -> list[ConversationEntry]:
        """The entries from the first one up to ``head_id``, oldest first (the last
        ``limit`` of them): one read of the end of the conversation's log when ``head_id``
        is its head, however long the history (a window of ``limit`` records for
        ``limit=``). ``KeyError`` if the store has no entry ``head_id``."""
        if head_id is None or limit == 0:
            return []
        sessions = self._hints(head_id)
        at_end = bool(sessions) and self._is_head(sessions[0], head_id)
        entries = None
        if at_end:
            # The read that found the head just now said the conversation ends at head_id,
            # and the history ending at an entry never changes (entries are immutable): a
            # history kept for that head is current.
            kept = self._kept.get(sessions[0])
            if kept is not None and kept[0] == head_id:
                history = kept[1]
                if limit is not None and limit < len(history):
                    history = history[-limit:]
                return fresh_entries(history)
            # The read that found the head may hold the history too.
            entries = tail_entries(sessions[0], self._heads[sessions[0]], head_id, limit)
        if entries is None:
            program = history_program(sessions, head_id, limit, at_end=at_end)
            entries = await self._execute(program, ("read",))
        if entries is None:
            holder = await in_thread(self._store, None, self._search, head_id, sessions)
            if holder is not None:
                program = history_program([holder], head_id, limit, at_end=False)
                entries = await self._execute(program, ("read",))
                sessions = [holder]
        if entries is None:
            raise KeyError(head_id)
        self._note(sessions[0], (entry.id for entry in entries))
        if limit is None and self._is_head(sessions[0], head_id):
            self._keep(sessions[0], head_id, fresh_entries(entries))
        return entries

    # -- closing ---------------------------------------------------------------------------

    def close(self) -> None:
        """Close the chatkeep store if this object opened it (``url=``). Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._owns_store:
            self._store.close()

    async def aclose(self) -> None:
        """Async :meth:`close`."""
        if self._closed:
            return
        self._closed = True
        if self._owns_store:
            await self._store.aclose()

    async def __aenter__(self) -> ChatkeepConversationStore:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def __enter__(self) -> ChatkeepConversationStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- the work ----------------------------------------------------------------------------

    async def _write(self, program: Program[T], hooks: tuple[str, ...] | None) -> T:
        """:meth:`_execute` for a write, finished even if the caller is cancelled meanwhile
        (run inline, it cannot be interrupted anyway)."""
        store = self._store
        if hooks is not None and not native(store) and store.inline_hooks.issuperset(hooks):
            return run(store, program)
        return await settled(self._execute(program, hooks))

    async def _execute(self, program: Program[T], hooks: tuple[str, ...] | None) -> T:
        """Run ``program`` on the store: awaited on the caller's loop where the store's
        async hooks allow it, else in a worker thread (or inline for SQLite and memory)."""
        if native(self._store):
            return await arun(self._store, program)
        return await in_thread(self._store, hooks, run, self._store, program)

    def _conversations(self) -> Iterator[tuple[str, Any]]:
        """The conversation sessions, newest first where the store keeps an index of last
        appends (with each one's time), else in the store's order (time ``None``)."""
        if self._store.supports("recent"):
            for session_id, updated in self._store.recent_sessions(prefix=self._prefix):
                if not is_internal_session(session_id):
                    yield session_id, updated
        else:
            for session_id in self._store.list_sessions(prefix=self._prefix):
                if not is_internal_session(session_id):
                    yield session_id, None

    def _list(self, scope: str | None, limit: int | None) -> list[ConversationRecord]:
        if limit == 0:
            return []
        best: list[tuple[Any, int, ConversationRecord]] = []  # a min-heap by updated_at
        for number, (session_id, updated) in enumerate(self._conversations()):
            # Every later conversation was last appended to before this one, so once this
            # one's last append is older than the newest `limit` found so far, stop.
            full = limit is not None and len(best) >= limit
            if full and updated is not None and updated + _CLOCK_SKEW < best[0][0]:
                break
            record = run(self._store, head_program(session_id)).record
            if record is None or (scope is not None and record.scope != scope):
                continue
            item = (record.updated_at, -number, record)
            if limit is None or len(best) < limit:
                heapq.heappush(best, item)
            elif item[:2] > best[0][:2]:
                heapq.heapreplace(best, item)
        best.sort(key=lambda item: item[:2], reverse=True)
        return [record for _, _, record in best]

    def _search(self, entry_id: str, skip: Sequence[str]) -> str | None:
        """The conversation session whose chain holds entry ``entry_id`` (a scan of every
        conversation, newest first where the store can tell), or ``None``."""
        from chatkeep.core.views._walk import find_record

        for session_id, _ in self._conversations():
            if session_id in skip:
                continue
            if run(self._store, find_record(session_id, entry_id)) is not None:
                self._note(session_id, (entry_id,))
                return session_id
        return None

    def _sources(
        self, record: ConversationRecord, entries: Sequence[ConversationEntry]
    ) -> list[str]:
        """Sessions whose chains may hold the entry a write's history goes on from."""
        base = entries[0].parent_id if entries else record.head_id
        sources = []
        if record.forked_from is not None:
            sources.append(self.session_id(record.forked_from))
        if base is not None:
            sources.extend(s for s in self._hints(base) if s not in sources)
        return sources

    def _hints(self, entry_id: str) -> list[str]:
        where = self._where.get(entry_id)
        return [] if where is None else [where]

    def _is_head(self, session_id: str, entry_id: str) -> bool:
        head = self._heads.get(session_id)
        return head is not None and head.record is not None and head.record.head_id == entry_id

    def _note(self, session_id: str, entry_ids: Any) -> None:
        where = self._where
        if len(where) > _REMEMBERED:
            where.clear()
        for entry_id in entry_ids:
            if entry_id is not None:
                where[entry_id] = session_id

    def _keep(self, session_id: str, head_id: str, entries: list[ConversationEntry]) -> None:
        """Keep ``entries`` (decoded from their JSON, never handed out) as the history
        ending at ``head_id`` of ``session_id``, within ``keep_entries`` (the histories kept
        longest are dropped first)."""
        self._forget(session_id)
        if len(entries) > self._keep_entries:
            return
        kept = self._kept
        while kept and self._kept_count + len(entries) > self._keep_entries:
            _, dropped = kept.pop(next(iter(kept)))
            self._kept_count -= len(dropped)
        kept[session_id] = (head_id, entries)
        self._kept_count += len(entries)

    def _forget(self, session_id: str) -> None:
        dropped = self._kept.pop(session_id, None)
        if dropped is not None:
            self._kept_count -= len(dropped[1])

    def _kept_after_write(
        self,
        session_id: str,
        record: ConversationRecord,
        entries: Sequence[ConversationEntry],
        expected_revision: str | None,
    ) -> None:
        """After a write: the kept history goes on with the new entries (their JSON round
        trip) when they extend it, or starts with them for a new conversation; anything
        else (a branch, a rewrite, a fork) drops it, and the next load reads it."""
        head_id = record.head_id
        kept = self._kept.get(session_id)
        if expected_revision is None and record.forked_from is None:
            base: list[ConversationEntry] | None = [] if kept is None else None
            base_id = None
        else:
            base = None if kept is None else kept[1]
            base_id = None if kept is None else kept[0]
        if base is None or head_id is None or self._keep_entries == 0:
            self._forget(session_id)
            return
        parent = base_id
        for entry in entries:
            if entry.parent_id != parent:
                self._forget(session_id)
                return
            parent = entry.id
        if parent != head_id:
            self._forget(session_id)
            return
        if not entries:
            return
        self._forget(session_id)
        self._keep(session_id, head_id, [*base, *round_trip(entries)])

    def _remember(
        self, session_id: str, head: Head, entries: Sequence[ConversationEntry] = ()
    ) -> None:
        heads = self._heads
        if len(heads) > _HEADS_REMEMBERED:
            heads.clear()
        heads[session_id] = head
        record = head.record
        if record is None:
            return
        ids: list[str | None] = [entry.id for entry in entries]
        ids += [record.head_id, *record.branches]
        self._note(session_id, ids)
        forked_at, forked_from = record.forked_at, record.forked_from
        if forked_at is not None and forked_from is not None and forked_at not in self._where:
            self._note(self.session_id(forked_from), (forked_at,))
