"""PostgreSQL: chatkeep vs hand-written psycopg 3 (blocking and asyncio) vs the peers.

Server: ``CHATKEEP_TEST_POSTGRES_URL`` or ``postgresql://postgres@127.0.0.1:5432/test``.
Everything of the run lives in the throwaway schema ``ck_bench_<token>``, dropped at the
end (chatkeep's tables, one set per chatkeep variant by ``table_prefix``; the raw tables;
the peers' tables, through ``search_path``).
"""

from __future__ import annotations

import json
import os
from typing import Any
from urllib.parse import urlencode, urlsplit, urlunsplit

from chatkeep.core import new_id, redact_url

from ..adapters import adapter_rows
from ..peers import AgentsSessions, LangChainHistories, optional
from ..variants import (
    AnyVariant,
    AsyncVariant,
    ChatkeepAsyncStore,
    ChatkeepBackend,
    ChatkeepFullLoad,
    ChatkeepFullLoadAsync,
    ChatkeepHistoryProvider,
    ChatkeepStore,
    ChatkeepSyncMessages,
    Kind,
    Level,
    Unavailable,
    Variant,
    batches,
    role_of,
)
from ..workload import WINDOW, encode_dict, exchange, message_dict, payload
from . import BackendRun, Context, ServiceMissing

__all__ = ["RawPostgres", "RawPostgresAsync", "setup"]

DEFAULT_URL = "postgresql://postgres@127.0.0.1:5432/test"
#: chatkeep's default pool size, given to the raw variants' throughput pools too.
POOL_SIZE = 10


def _with_query(url: str, **options: str) -> str:
    parts = urlsplit(url)
    query = "&".join(q for q in (parts.query, urlencode(options)) if q)
    return urlunsplit(parts._replace(query=query))


class _Statements:
    """The raw turn's SQL for one table (a composed, quoted identifier)."""

    def __init__(self, schema: str, table: str) -> None:
        from psycopg import sql

        name = sql.Identifier(schema, table)
        self.create = sql.SQL(
            "CREATE TABLE {} (session_id text NOT NULL, "
            "seq bigint GENERATED ALWAYS AS IDENTITY, message_id text NOT NULL, "
            "data bytea NOT NULL, PRIMARY KEY (session_id, seq))"
        ).format(name)
        # Newest first through the primary key, reversed in Python: one backward index scan.
        self.tail = sql.SQL(
            "SELECT message_id, data FROM {} WHERE session_id = %s ORDER BY seq DESC LIMIT %s"
        ).format(name)
        self.all = sql.SQL(
            "SELECT message_id, data FROM {} WHERE session_id = %s ORDER BY seq"
        ).format(name)
        # One statement, so autocommit makes it atomic; the identity keeps writers apart.
        self.append = sql.SQL(
            "INSERT INTO {} (session_id, message_id, data) VALUES (%s, %s, %s), (%s, %s, %s)"
        ).format(name)
        self.copy = sql.SQL("COPY {} (session_id, message_id, data) FROM STDIN").format(name)
        self.analyze = sql.SQL("ANALYZE {}").format(name)


def _exchange(session_id: str, decode: bool, number: int) -> tuple[Any, ...]:
    params: list[Any] = []
    for kind in exchange(number):
        message_id = new_id()
        data = (
            encode_dict(message_dict(kind, number, message_id))
            if decode
            else payload(kind, number % 128)
        )
        params += [session_id, message_id, data]
    return tuple(params)


def _fill_rows(session_id: str, decode: bool, count: int) -> list[tuple[str, str, bytes]]:
    rows = []
    for n in range(count):
        message_id = new_id()
        data = (
            encode_dict(message_dict(role_of(n), n, message_id))
            if decode
            else payload(role_of(n), n)
        )
        rows.append((session_id, message_id, data))
    return rows


class RawPostgres(Variant):
    """The best hand-written turn on psycopg 3: one indexed ``ORDER BY seq DESC LIMIT 50``
    (binary rows, server-side prepared after the first few) and one two-row ``INSERT``,
    autocommit. The table is clustered by its key ``(session_id, seq)``; positions come
    from an identity column (not gap-free, not per session), no record-id uniqueness, so
    no idempotent retry and no session row. Latency runs on one dedicated connection;
    throughput on a pool of ``POOL_SIZE`` like chatkeep's default."""

    kind: Kind = "raw"

    def __init__(self, url: str, schema: str, app: str, *, decode: bool) -> None:
        self.name = "raw psycopg + json" if decode else "raw psycopg"
        self._app = app
        self.level: Level = "messages" if decode else "records"
        self._url = url
        self._decode = decode
        self._sql = _Statements(schema, "raw_json" if decode else "raw_records")
        self._connection: Any = None
        self._pool: Any = None

    def open(self) -> None:
        import psycopg

        self._connection = psycopg.connect(self._url, autocommit=True, application_name=self._app)
        self._connection.execute(self._sql.create)

    def fill(self, session_id: str, count: int) -> None:
        with self._connection.cursor() as cursor:
            for part in batches(count, 5000):
                with cursor.copy(self._sql.copy) as copy:
                    for row in _fill_rows(session_id, self._decode, len(part)):
                        copy.write_row(row)
            cursor.execute(self._sql.analyze)

    def _turn(self, connection: Any, session_id: str, number: int) -> object:
        cursor = connection.cursor(binary=True)
        rows = cursor.execute(self._sql.tail, (session_id, WINDOW)).fetchall()
        rows.reverse()
        cursor.execute(self._sql.append, _exchange(session_id, self._decode, number))
        return rows

    def load(self, session_id: str) -> object:
        rows = (
            self._connection.cursor(binary=True)
            .execute(self._sql.tail, (session_id, WINDOW))
            .fetchall()
        )
        rows.reverse()
        if self._decode:
            return [json.loads(data) for _, data in rows]
        return rows

    def turn(self, session_id: str, number: int) -> None:
        if self._pool is None:
            rows = self._turn(self._connection, session_id, number)
        else:
            with self._pool.connection() as connection:
                rows = self._turn(connection, session_id, number)
        if self._decode:
            [json.loads(data) for _, data in rows]  # type: ignore[attr-defined]

    def concurrent(self, threads: int) -> None:
        from psycopg_pool import ConnectionPool

        self._pool = ConnectionPool(
            self._url,
            min_size=POOL_SIZE,
            max_size=POOL_SIZE,
            kwargs={"autocommit": True, "application_name": self._app},
        )
        self._pool.wait()

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
        if self._connection is not None:
            self._connection.close()


class RawPostgresFull(RawPostgres):
    """The ``full`` level: the whole session (``ORDER BY seq`` on the primary key), binary
    rows, ``json.loads`` of each; no append."""

    def __init__(self, url: str, schema: str, app: str) -> None:
        super().__init__(url, schema, app, decode=True)
        self.name = "raw psycopg + json (whole session)"
        self.level = "full"
        self._sql = _Statements(schema, "raw_full")

    def _load_on(self, connection: Any, session_id: str) -> list[Any]:
        rows = connection.cursor(binary=True).execute(self._sql.all, (session_id,)).fetchall()
        return [json.loads(data) for _, data in rows]

    def load(self, session_id: str) -> object:
        return self._load_on(self._connection, session_id)

    def turn(self, session_id: str, number: int) -> None:
        if self._pool is None:
            self._load_on(self._connection, session_id)
        else:
            with self._pool.connection() as connection:
                self._load_on(connection, session_id)


class RawPostgresAsync(AsyncVariant):
    """:class:`RawPostgres` on ``psycopg.AsyncConnection`` (an ``AsyncConnectionPool`` for
    throughput)."""

    kind: Kind = "raw"

    def __init__(self, url: str, schema: str, app: str, *, decode: bool) -> None:
        self.name = "raw psycopg async + json" if decode else "raw psycopg async"
        self._app = app
        self.level: Level = "messages" if decode else "records"
        self._url = url
        self._decode = decode
        self._sql = _Statements(schema, "rawa_json" if decode else "rawa_records")
        self._connection: Any = None
        self._pool: Any = None
        self._want_pool = False

    async def open(self) -> None:
        import psycopg

        self._connection = await psycopg.AsyncConnection.connect(
            self._url, autocommit=True, application_name=self._app
        )
        await self._connection.execute(self._sql.create)

    async def fill(self, session_id: str, count: int) -> None:
        async with self._connection.cursor() as cursor:
            for part in batches(count, 5000):
                async with cursor.copy(self._sql.copy) as copy:
                    for row in _fill_rows(session_id, self._decode, len(part)):
                        await copy.write_row(row)
            await cursor.execute(self._sql.analyze)

    async def _turn(self, connection: Any, session_id: str, number: int) -> Any:
        cursor = connection.cursor(binary=True)
        await cursor.execute(self._sql.tail, (session_id, WINDOW))
        rows = await cursor.fetchall()
        rows.reverse()
        await cursor.execute(self._sql.append, _exchange(session_id, self._decode, number))
        return rows

    async def load(self, session_id: str) -> object:
        cursor = self._connection.cursor(binary=True)
        await cursor.execute(self._sql.tail, (session_id, WINDOW))
        rows = await cursor.fetchall()
        rows.reverse()
        if self._decode:
            return [json.loads(data) for _, data in rows]
        return rows

    async def turn(self, session_id: str, number: int) -> None:
        if self._want_pool and self._pool is None:
            from psycopg_pool import AsyncConnectionPool

            self._pool = AsyncConnectionPool(
                self._url, min_size=POOL_SIZE, max_size=POOL_SIZE,
                kwargs={"autocommit": True, "application_name": self._app}, open=False,
            )  # fmt: skip
            await self._pool.open(wait=True)
        if self._pool is None:
            rows = await self._turn(self._connection, session_id, number)
        else:
            async with self._pool.connection() as connection:
                rows = await self._turn(connection, session_id, number)
        if self._decode:
            [json.loads(data) for _, data in rows]

    def concurrent(self, threads: int) -> None:
        self._want_pool = True

    async def close(self) -> None:
        if self._pool is not None:
            await self._pool.close()
        if self._connection is not None:
            await self._connection.close()


def _peers(url: str, schema: str, app: str) -> list[AnyVariant | Unavailable]:
    scheme_less = url.split("://", 1)[1]

    def agents_sqlalchemy() -> AnyVariant:
        from agents.extensions.memory.sqlalchemy_session import SQLAlchemySession
        from sqlalchemy.ext.asyncio import create_async_engine

        engine = create_async_engine(
            "postgresql+asyncpg://" + scheme_less,
            connect_args={"server_settings": {"search_path": schema, "application_name": app}},
        )

        async def dispose() -> None:
            await engine.dispose()

        return AgentsSessions(
            "Agents SQLAlchemySession (asyncpg)",
            lambda sid: SQLAlchemySession(sid, engine=engine, create_tables=True),
            after=dispose,
        )

    def langchain_sql() -> AnyVariant:
        from langchain_community.chat_message_histories import SQLChatMessageHistory
        from sqlalchemy import create_engine

        engine = create_engine(
            "postgresql+psycopg://" + scheme_less,
            connect_args={"options": f"-c search_path={schema}", "application_name": app},
        )
        return LangChainHistories(
            "LangChain SQLChatMessageHistory (psycopg)",
            lambda sid: SQLChatMessageHistory(session_id=sid, connection=engine),
            after=engine.dispose,
            note="no tail read: loads the whole session, then keeps the last 50",
        )

    def langchain_postgres() -> AnyVariant:
        import psycopg
        from langchain_postgres import PostgresChatMessageHistory

        connection = psycopg.connect(
            url, options=f"-c search_path={schema}", autocommit=True, application_name=app
        )
        PostgresChatMessageHistory.create_tables(connection, "lc_messages")
        return LangChainHistories(
            "langchain-postgres PostgresChatMessageHistory",
            lambda sid: PostgresChatMessageHistory(
                "lc_messages", _uuid(sid), sync_connection=connection
            ),
            after=connection.close,
            note="no tail read; one psycopg connection shared (the documented usage)",
        )

    return [
        optional(
            "Agents SQLAlchemySession (asyncpg)",
            ["agents", "sqlalchemy", "asyncpg"],
            "openai-agents[sqlalchemy] asyncpg",
            agents_sqlalchemy,
        ),
        optional(
            "LangChain SQLChatMessageHistory (psycopg)",
            ["langchain_community", "sqlalchemy"],
            "langchain-community",
            langchain_sql,
        ),
        optional(
            "langchain-postgres PostgresChatMessageHistory",
            ["langchain_postgres"],
            "langchain-postgres",
            langchain_postgres,
        ),
    ]


def _uuid(session_id: str) -> str:
    """langchain-postgres wants UUID session ids: a stable one per session id."""
    import uuid

    return str(uuid.uuid5(uuid.NAMESPACE_URL, session_id))


def setup(context: Context) -> BackendRun:
    """chatkeep on ``<url>?schema=ck_bench_<token>&table_prefix=...``, the rest beside it."""
    try:
        import psycopg
        from psycopg import sql
    except ImportError as exc:
        raise ServiceMissing("psycopg is not installed (pip install chatkeep-postgres)") from exc
    url = os.environ.get("CHATKEEP_TEST_POSTGRES_URL") or DEFAULT_URL
    try:
        admin = psycopg.connect(url, autocommit=True, connect_timeout=3)
    except psycopg.Error as exc:
        raise ServiceMissing(f"no PostgreSQL at {redact_url(url)}: {type(exc).__name__}") from None
    schema = f"ck_bench_{context.token}"
    # Every connection of the run carries this name, so that cleanup can end any that a
    # failed variant left open (holding locks the DROP SCHEMA would wait for).
    app = f"ckbench-{context.token}"
    admin.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))

    def chatkeep_url(prefix: str) -> str:
        return _with_query(url, schema=schema, table_prefix=prefix, application_name=app)

    variants: list[AnyVariant | Unavailable] = [
        RawPostgres(url, schema, app, decode=False),
        ChatkeepStore(chatkeep_url("s_")),
        ChatkeepBackend(chatkeep_url("b_")),
        RawPostgresAsync(url, schema, app, decode=False),
        ChatkeepAsyncStore(chatkeep_url("a_")),
        RawPostgres(url, schema, app, decode=True),
        RawPostgresAsync(url, schema, app, decode=True),
        ChatkeepHistoryProvider(chatkeep_url("p_")),
        ChatkeepHistoryProvider(chatkeep_url("r_"), resumed=True),
        ChatkeepSyncMessages(chatkeep_url("v_")),
        RawPostgresFull(url, schema, app),
        ChatkeepFullLoad(chatkeep_url("f_")),
        ChatkeepFullLoadAsync(chatkeep_url("fa_")),
    ]
    if context.peers:
        variants += _peers(url, schema, app)
        variants += adapter_rows(lambda tag: chatkeep_url(tag.replace("-", "_") + "_"))

    def cleanup() -> None:
        admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE application_name = %s AND pid <> pg_backend_pid()",
            (app,),
        )
        admin.execute("SET lock_timeout = '30s'")
        admin.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))
        admin.close()

    version = admin.info.server_version
    return BackendRun(
        "postgres",
        f"PostgreSQL {version // 10000}.{version % 10000} at {redact_url(url)}, "
        f"schema {schema} (dropped after)",
        variants,
        [cleanup],
    )
