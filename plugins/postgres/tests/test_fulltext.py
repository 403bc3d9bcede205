"""The ``fulltext`` capability on PostgreSQL: words in the append's statement, delete drops
them (the trigger), and ``build_index`` for rows stored before migration 5."""

from __future__ import annotations

import asyncio

import psycopg
import pytest
from chatkeep_postgres_support import with_query
from psycopg import sql

from chatkeep.core import (
    AgentSession,
    HistoryProvider,
    Message,
    Store,
    TextContent,
    asearch,
    encode_records,
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


def test_a_row_a_record_and_none_for_a_retry_that_stores_nothing(
    postgres_url: str, fresh_schema: str, admin: psycopg.Connection[tuple[object, ...]]
) -> None:
    with open_store(with_query(postgres_url, schema=fresh_schema)) as store:
        batch = encode_records(
            [Message("user", [TextContent(f"fjord {n}")], message_id=new_id()) for n in range(3)]
        )
        store.append("s", batch)
        assert _words(admin, fresh_schema) == 3
        store.append("s", batch)  # an exact retry: nothing stored, no words written
        assert _words(admin, fresh_schema) == 3
        assert [hit.session_id for hit in search(store, "fjord", limit=None)] == ["s"] * 3


def test_words_from_before_migration_6_still_match_and_are_deleted(
    postgres_url: str,
    fresh_schema: str,
    admin: psycopg.Connection[tuple[object, ...]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A schema at version 5 holds one row a record under the md5(record_id) key; after
    migration 6 those rows still find their sessions, new appends add rows beside them, and
    a delete drops both."""
    from chatkeep.postgres import migrate

    url = with_query(postgres_url, schema=fresh_schema)
    old = Message("user", [TextContent("the Oslo invoice")], message_id=new_id())
    with monkeypatch.context() as patch:
        patch.setattr(migrate, "MIGRATIONS", migrate.MIGRATIONS[:5])
        patch.setattr(migrate, "LATEST_VERSION", 5)
        with open_store(url) as store:
            plain = Store(store.backend, capabilities=store.capabilities - {"fulltext"})
            plain.append("a", encode_records([old]))
    table = sql.Identifier(fresh_schema, "fulltext")
    admin.execute(
        sql.SQL(
            "INSERT INTO {} (namespace, session_id, record_id, words) "
            "VALUES ('', 'a', %s, array_to_tsvector('{{the,oslo,invoice}}'::text[]))"
        ).format(table),
        (old.message_id,),
    )
    with open_store(url) as store:
        assert store.fulltext_ready()
        assert [hit.session_id for hit in search(store, "oslo invoice")] == ["a"]
        _say(store, "a", "the Oslo receipt")
        _say(store, "b", "the Oslo fjord")
        assert _words(admin, fresh_schema) == 3
        assert [hit.session_id for hit in search(store, "oslo", limit=None)] == ["b", "a", "a"]
        store.delete("a")
        assert _words(admin, fresh_schema) == 1
        assert [hit.session_id for hit in search(store, "oslo invoice")] == []
