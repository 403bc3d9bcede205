"""The ``fulltext`` hooks of :class:`~chatkeep.postgres.PostgresStore` (see
:mod:`.fulltext_sql` for the tables and the statements, and core/BACKENDS.md for the
contract)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from chatkeep.core.backend import Record

from .arrays import TextArray
from .faults import Call
from .fulltext_sql import tsquery

__all__ = ["FulltextHooks"]


class FulltextHooks:
    """The ``fulltext`` hooks of :class:`~chatkeep.postgres.PostgresStore` (a mixin)."""

    _namespace: str

    if TYPE_CHECKING:
        options: Any
        _names: Any
        _ttl: Any

        def _run(
            self, call: Any, statement: str, params: Any, row_factory: Any = ...
        ) -> list[Any]: ...
        async def _arun(
            self, call: Any, statement: str, params: Any, row_factory: Any = ...
        ) -> list[Any]: ...
        def _writable(self, operation: str) -> None: ...
        def _append_params(self, session_id: str, records: list[Record]) -> tuple[Any, ...]: ...
        def _recent_params(
            self, prefix: str | None, before: tuple[float, str] | None, limit: int
        ) -> tuple[str, dict[str, Any]]: ...

    def _words_params(
        self, session_id: str, records: list[Record], words: list[str]
    ) -> tuple[Any, ...]:
        ids = TextArray([record.id for record in records])
        return (self._namespace, session_id, ids, TextArray(list(words)))

    def fulltext_append(self, session_id: str, records: list[Record], words: list[str]) -> None:
        """``append`` and the records' words, in one statement."""
        self._writable("append")
        params = (
            *self._append_params(session_id, records),
            *self._words_params(session_id, records, words),
        )
        self._run(Call("append", session_id), "fulltext_append", params)

    async def afulltext_append(
        self, session_id: str, records: list[Record], words: list[str]
    ) -> None:
        """Async :meth:`fulltext_append`."""
        self._writable("append")
        params = (
            *self._append_params(session_id, records),
            *self._words_params(session_id, records, words),
        )
        await self._arun(Call("append", session_id), "fulltext_append", params)

    def fulltext_append_if(
        self, session_id: str, records: list[Record], after: str | None, words: list[str]
    ) -> None:
        """``append_if`` and the records' words, in one statement."""
        self._writable("append")
        params = (
            *self._append_params(session_id, records),
            after,
            *self._words_params(session_id, records, words),
        )
        self._run(Call("append", session_id, after), "fulltext_append_if", params)

    async def afulltext_append_if(
        self, session_id: str, records: list[Record], after: str | None, words: list[str]
    ) -> None:
        """Async :meth:`fulltext_append_if`."""
        self._writable("append")
        params = (
            *self._append_params(session_id, records),
            after,
            *self._words_params(session_id, records, words),
        )
        await self._arun(Call("append", session_id, after), "fulltext_append_if", params)

    def _sessions_params(
        self,
        groups: list[list[str]],
        prefix: str | None,
        before: tuple[float, str] | None,
        limit: int,
    ) -> tuple[str, dict[str, Any]] | None:
        query = tsquery(groups)
        if query is None:
            return None
        name, params = self._recent_params(prefix, before, limit)
        params["query"] = query
        return name.replace("recent", "fulltext_sessions"), params

    def fulltext_sessions(
        self,
        groups: list[list[str]],
        prefix: str | None,
        before: tuple[float, str] | None,
        limit: int,
    ) -> list[tuple[str, float]]:
        """Up to ``limit`` live sessions of this namespace holding a record that matches one
        of ``groups``, in ``recent_sessions``'s order and paging."""
        found = self._sessions_params(groups, prefix, before, limit)
        if found is None:
            return []
        name, params = found
        return [(row[0], row[1]) for row in self._run(Call("read", ""), name, params)]

    async def afulltext_sessions(
        self,
        groups: list[list[str]],
        prefix: str | None,
        before: tuple[float, str] | None,
        limit: int,
    ) -> list[tuple[str, float]]:
        """Async :meth:`fulltext_sessions`."""
        found = self._sessions_params(groups, prefix, before, limit)
        if found is None:
            return []
        name, params = found
        return [(row[0], row[1]) for row in await self._arun(Call("read", ""), name, params)]

    def _exists_params(self) -> dict[str, str] | None:
        """The catalog lookup of the backlog table, for a read-only handle (which never
        migrates); ``None`` for a writable one (its schema is migrated when opened)."""
        if not self.options.read_only:
            return None
        names = self._names
        return {"schema": names.schema, "table": names.prefix + "fulltext_backlog"}

    def fulltext_pending(self) -> int:
        """How many records of this namespace stored before the index are not indexed (1
        for a read-only handle on a schema from before migration 5: not ready, a scan)."""
        exists = self._exists_params()
        if exists is not None and not self._run(Call("read", ""), "fulltext_exists", exists)[0][0]:
            return 1
        rows = self._run(Call("read", ""), "fulltext_pending", {"namespace": self._namespace})
        return int(rows[0][0]) if rows else 0

    async def afulltext_pending(self) -> int:
        """Async :meth:`fulltext_pending`."""
        exists = self._exists_params()
        if exists is not None:
            found = await self._arun(Call("read", ""), "fulltext_exists", exists)
            if not found[0][0]:
                return 1
        params = {"namespace": self._namespace}
        rows = await self._arun(Call("read", ""), "fulltext_pending", params)
        return int(rows[0][0]) if rows else 0

    def fulltext_backlog(self, limit: int) -> list[tuple[Any, str, Record]]:
        """Up to ``limit`` records of this namespace not indexed yet, as ``((session id,
        position, record id), session id, record)``."""
        self._writable("append")
        params = {"namespace": self._namespace, "limit": limit}
        rows = self._run(Call("append", ""), "fulltext_backlog", params)
        return [
            ((session, seq, record_id), session, Record(record_id, bytes(data)))
            for session, seq, record_id, data in rows
        ]

    def fulltext_backfill(self, entries: list[tuple[Any, str]]) -> None:
        """Index ``(key, words)`` of records :meth:`fulltext_backlog` returned, and move
        the backlog past them, in one statement."""
        self._writable("append")
        if not entries:
            return
        params = {
            "namespace": self._namespace,
            "sessions": TextArray([key[0] for key, _ in entries]),
            "seqs": [int(key[1]) for key, _ in entries],
            "ids": TextArray([key[2] for key, _ in entries]),
            "words": TextArray([words for _, words in entries]),
        }
        self._run(Call("append", ""), "fulltext_backfill", params)
