"""The ``fulltext`` capability on PostgreSQL: words in the append's statement, delete drops
them (the trigger), and ``build_index`` for rows stored before migration 5."""

from __future__ import annotations

import asyncio

import psycopg
from chatkeep_postgres_support import with_query
from psycopg import sql

from chatkeep.core import (
    AgentSession,
    HistoryProvider,
    Message,
    Store,
    TextContent,
    asearch,
    new_id,
    open_store,
    search,
)
from chatkeep.core.search_index import build_index


def _say(store: Store, session_id: str, text: str) -> None:
    message = Message("user", [TextContent(text)], message_id=new_id())
    asyncio.run(HistoryProvider(store).save(AgentSession(session_id), [message]))


def _words(admin: psycopg.Connection[tuple[object, ...]], schema: str) -> int:
    table = sql.Identifier(schema, "fulltext")
    row = admin.execute(sql.SQL("SELECT count(*) FROM {}").format(table)).fetchone()
    assert row is not None
    count: int = row[0]  # type: ignore[assignment]
    return count


def test_words_are_written_with_the_append_and_dropped_with_the_session(
    postgres_url: str, fresh_schema: str, admin: psycopg.Connection[tuple[object, ...]]
) -> None:
    with open_store(with_query(postgres_url, schema=fresh_schema)) as store:
        assert store.supports("fulltext") and store.fulltext_ready()
        _say(store, "a", "The Oslo invoice")
        _say(store, "b", "Ålesund weather")
        assert _words(admin, fresh_schema) == 2
        hits = [hit.session_id for hit in search(store, "oslo invoice")]
        assert hits == ["a"]

        async def found() -> list[str]:
            return [hit.session_id async for hit in asearch(store, "alesund")]

        assert asyncio.run(found()) == ["b"]
        read_only = open_store(with_query(postgres_url, schema=fresh_schema, mode="ro"))
        with read_only:
            assert read_only.fulltext_ready()
            assert [hit.session_id for hit in search(read_only, "oslo")] == ["a"]
        store.delete("a")
        assert _words(admin, fresh_schema) == 1
        assert list(search(store, "oslo")) == []


def test_rows_from_before_the_index_are_built(
    postgres_url: str, fresh_schema: str, admin: psycopg.Connection[tuple[object, ...]]
) -> None:
    url = with_query(postgres_url, schema=fresh_schema)
    with open_store(url) as store:
        for n in range(7):
            _say(store, f"s{n}", f"about the fjord number {n}")
    # As if the rows were stored before migration 5: no words, a backlog.
    words = sql.Identifier(fresh_schema, "fulltext")
    backlog = sql.Identifier(fresh_schema, "fulltext_backlog")
    sessions = sql.Identifier(fresh_schema, "sessions")
    admin.execute(sql.SQL("DELETE FROM {}").format(words))
    admin.execute(
        sql.SQL("INSERT INTO {} SELECT namespace, session_id, 0, length FROM {}").format(
            backlog, sessions
        )
    )
    with open_store(url) as store:
        assert store.fulltext_pending() == 7 and not store.fulltext_ready()
        scanned = [hit.to_json() for hit in search(store, "fjord", limit=None)]
        assert len(scanned) == 7
        assert build_index(store, batch=3) == 7
        assert store.fulltext_ready()
        indexed = [hit.to_json() for hit in search(store, "fjord", limit=None)]
        assert indexed == scanned
        assert build_index(store) == 0
