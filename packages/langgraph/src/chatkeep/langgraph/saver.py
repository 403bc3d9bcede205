"""``ChatkeepSaver``: a LangGraph checkpointer on any chatkeep store."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Sequence
from types import TracebackType
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

from chatkeep.core import Store
from chatkeep.core.adapters import adapter_store

from .engine import Engine, next_version
from .layout import DEFAULT_PREFIX, Layout
from .ops import aiterate, arun, iterate, run

__all__ = ["ChatkeepSaver"]


class ChatkeepSaver(BaseCheckpointSaver[str]):
    """A LangGraph checkpointer that keeps threads in a chatkeep store.

    Drop-in for ``InMemorySaver`` / ``SqliteSaver`` / ``PostgresSaver``::

        saver = ChatkeepSaver(url="sqlite:///checkpoints.db")
        graph = builder.compile(checkpointer=saver)

    ``url=`` opens a store (any chatkeep URL: ``sqlite://``, ``redis://``,
    ``postgresql://``, ``s3://``, ``azblob://``, a third-party scheme); the saver closes
    it on :meth:`close`. ``store=`` uses a store you opened (left open). With neither,
    ``CHATKEEP_URL`` (else the embedded SQLite default) is used. ``serde`` is LangGraph's
    serializer (``JsonPlusSerializer`` by default, ``EncryptedSerializer`` works too).
    ``prefix`` is put before every session id the saver uses, so checkpoints can share a
    store with chat histories.

    Every method has a native async twin (``aget_tuple``, ``alist``, ``aput``, ...) that
    awaits the store's async side and never blocks the event loop. ``delete_thread``,
    ``prune`` and ``delete_for_runs`` need a store with ``delete``; ``delete_for_runs``
    and ``list(None)`` (every thread) also need ``list_sessions``: other stores raise
    :class:`~chatkeep.core.errors.CapabilityMissing`.
    """

    def __init__(
        self,
        *,
        url: str | None = None,
        store: Store | None = None,
        serde: SerializerProtocol | None = None,
        prefix: str = DEFAULT_PREFIX,
    ) -> None:
        super().__init__(serde=serde)
        layout = Layout(prefix)
        opened, self._owns_store = adapter_store(url, store, owner="ChatkeepSaver")
        self.store: Store = opened
        self._engine = Engine(opened, self.serde, layout)

    def __repr__(self) -> str:
        return f"<ChatkeepSaver store={self.store!r} prefix={self._engine.layout.prefix!r}>"

    # -- lifecycle -----------------------------------------------------------------------

    def close(self) -> None:
        """Close the store if the saver opened it (``url=``). Idempotent."""
        if self._owns_store:
            self.store.close()

    async def aclose(self) -> None:
        """Async :meth:`close`."""
        if self._owns_store:
            await self.store.aclose()

    def __enter__(self) -> ChatkeepSaver:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    async def __aenter__(self) -> ChatkeepSaver:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()

    # -- the checkpointer interface ------------------------------------------------------

    def get_next_version(self, current: str | None, channel: None = None) -> str:
        """A version greater than ``current`` with a random part (see the README)."""
        return next_version(current)

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint ``config`` names (its ``checkpoint_id``, else the latest one)."""
        return run(self.store, self._engine.get_tuple(config))

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """Async :meth:`get_tuple`."""
        return await arun(self.store, self._engine.get_tuple(config))

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """Checkpoints newest first: of ``config``'s thread (and namespace, when given;
        every thread for ``None``), whose metadata matches ``filter``, older than
        ``before``, at most ``limit`` (reading stops there)."""
        steps = self._engine.checkpoints(config, filter=filter, before=before, limit=limit)
        yield from iterate(self.store, steps)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """Async :meth:`list`."""
        steps = self._engine.checkpoints(config, filter=filter, before=before, limit=limit)
        async for item in aiterate(self.store, steps):
            yield item

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Store a checkpoint: the values of ``new_versions`` and the checkpoint, in one
        append; unchanged channels point at the values stored earlier."""
        return run(self.store, self._engine.put(config, checkpoint, metadata, new_versions))

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Async :meth:`put`."""
        return await arun(self.store, self._engine.put(config, checkpoint, metadata, new_versions))

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Store a task's pending writes for the checkpoint ``config`` names."""
        run(self.store, self._engine.put_writes(config, writes, task_id, task_path))

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Async :meth:`put_writes`."""
        await arun(self.store, self._engine.put_writes(config, writes, task_id, task_path))

    def delete_thread(self, thread_id: str) -> None:
        """Erase every checkpoint, value and write of a thread (all namespaces)."""
        run(self.store, self._engine.delete_thread(thread_id))

    async def adelete_thread(self, thread_id: str) -> None:
        """Async :meth:`delete_thread`."""
        await arun(self.store, self._engine.delete_thread(thread_id))

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Erase the checkpoints (and their writes) whose metadata ``run_id`` is listed."""
        run(self.store, self._engine.delete_for_runs(run_ids))

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Async :meth:`delete_for_runs`."""
        await arun(self.store, self._engine.delete_for_runs(run_ids))

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy every checkpoint and write of a thread to another thread."""
        run(self.store, self._engine.copy_thread(source_thread_id, target_thread_id))

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Async :meth:`copy_thread`."""
        await arun(self.store, self._engine.copy_thread(source_thread_id, target_thread_id))

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """``keep_latest``: keep each namespace's latest checkpoint; ``delete``: erase."""
        run(self.store, self._engine.prune(thread_ids, strategy))

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """Async :meth:`prune`."""
        await arun(self.store, self._engine.prune(thread_ids, strategy))
