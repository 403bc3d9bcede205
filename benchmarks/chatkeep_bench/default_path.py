"""The default path (issue 29): ``HistoryProvider``'s whole-history turn and window turn,
kept and resumed, against the raw driver and the OpenAI Agents SDK's sessions, in one
interleaved run.

    python benchmarks/run.py default-path [--quick] [--backends sqlite,sqlite-disk,redis,postgres]
                                          [--lengths 10,1000,10000] [--rounds 100] [--json f]
                                          [--loads whole,window,full]

A **turn** loads the session's history and appends one exchange (the harness's workload:
two ~300-byte messages, every fifth exchange a tool call and its result). **whole**: the
load is the whole history, ``HistoryProvider``'s default (``max_messages=None``) and what
``get_items()`` of an Agents SDK session returns without a limit: **the default path**.
**window**: the last 50 (``max_messages=50``, ``get_items(limit=50)``). Rows:

- ``raw``: the driver plus ``json.loads`` of each row (``sqlite3`` ``ORDER BY seq``, Redis
  ``LRANGE``, psycopg), then one insert / ``RPUSH`` of the two ``json.dumps``-ed messages.
- ``agents``: the Agents SDK's ``SQLiteSession`` (sqlite), ``RedisSession`` (redis),
  ``SQLAlchemySession`` (postgres; asyncpg when installed, else psycopg's async driver).
- ``chatkeep kept``: one ``AgentSession`` object per conversation across turns (an agent's
  steady state: two unmeasured loads first); ``chatkeep resumed``: a new
  ``AgentSession(session_id)`` every turn (``invoking`` + ``invoked``).
- ``full``: the whole history only, nothing appended: ``read_view(store, sid)`` against
  the raw read plus ``json.loads``.

SQLite runs twice: ``sqlite`` on tmpfs (``/dev/shm``) and ``sqlite-disk`` on the machine's
disk, both ``synchronous=FULL`` (chatkeep's default; the raw and SDK connections are set
the same). Every row has sessions of its own, filled before the rounds (unmeasured); each
round runs one turn of every row in a shuffled order. Sessions per row: enough that a
history grows by at most ~20% during the run.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import math
import os
import secrets
import sqlite3
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from random import Random
from typing import Any

from chatkeep.core import AgentSession, HistoryProvider, Store, aread_view, open_store

from .interleaved import run, summary
from .peers import agents_item
from .variants import batches
from .workload import WINDOW, encode_dict, exchange, kind_of, message, message_dict, payload, record

POSTGRES = (
    os.environ.get("CHATKEEP_TEST_POSTGRES_URL") or "postgresql://postgres@127.0.0.1:5432/test"
)
REDIS = os.environ.get("CHATKEEP_TEST_REDIS_URL") or "redis://127.0.0.1:6379/0"
BACKENDS = ["sqlite", "sqlite-disk", "redis", "postgres"]
#: The loads measured (``--loads``): every one unless asked for fewer.
LOADS = ("whole", "window", "full")

Turn = Callable[[str, int], Awaitable[None]]
Fill = Callable[[str, int], Awaitable[None]]


class Row:
    """One way of doing the turn: ``fill`` a session (unmeasured), ``prepare`` it
    (unmeasured), then measured ``turn``\\ s."""

    def __init__(self, name: str, load: str, fill: Fill, turn: Turn) -> None:
        self.name, self.load = name, load  # load: "whole", "window" or "full"
        self.fill, self.turn = fill, turn
        self.prepare: Turn | None = None
        self.samples: list[float] = []


# -- raw drivers --------------------------------------------------------------------------


def _raw_rows(number: int) -> list[tuple[str, bytes]]:
    from chatkeep.core import new_id

    rows = []
    for kind in exchange(number):
        message_id = new_id()
        rows.append((message_id, encode_dict(message_dict(kind, number, message_id))))
    return rows


def _raw_sqlite(path: Path) -> tuple[list[Row], Callable[[], None]]:
    connection = sqlite3.connect(path, isolation_level=None)
    connection.execute("PRAGMA journal_mode = wal")
    connection.execute("PRAGMA synchronous = full")
    connection.execute(
        "CREATE TABLE m (session_id TEXT NOT NULL, seq INTEGER NOT NULL, message_id TEXT "
        "NOT NULL, data BLOB NOT NULL, PRIMARY KEY (session_id, seq)) WITHOUT ROWID"
    )
    append = (
        "WITH last(seq) AS (SELECT coalesce(max(seq), -1) FROM m WHERE session_id = ?1) "
        "INSERT INTO m SELECT ?1, seq + 1, ?2, ?3 FROM last UNION ALL "
        "SELECT ?1, seq + 2, ?4, ?5 FROM last"
    )

    async def fill(session_id: str, count: int) -> None:
        connection.execute("BEGIN")
        connection.executemany(
            "INSERT INTO m VALUES (?, ?, ?, ?)",
            [(session_id, n, f"h{n}", payload(kind_of(n), n)) for n in range(count)],
        )
        connection.execute("COMMIT")

    def load(session_id: str, limit: int | None) -> list[Any]:
        if limit is None:
            rows = connection.execute(
                "SELECT message_id, data FROM m WHERE session_id = ? ORDER BY seq", (session_id,)
            ).fetchall()
        else:
            rows = connection.execute(
                "SELECT message_id, data FROM m WHERE session_id = ? ORDER BY seq DESC LIMIT ?",
                (session_id, limit),
            ).fetchall()
            rows.reverse()
        return [json.loads(data) for _, data in rows]

    def turn(limit: int | None) -> Turn:
        async def go(session_id: str, number: int) -> None:
            load(session_id, limit)
            (a, adata), (b, bdata) = _raw_rows(number)
            connection.execute(append, (session_id, a, adata, b, bdata))

        return go

    async def full(session_id: str, number: int) -> None:
        load(session_id, None)

    rows = [
        Row("raw", "whole", fill, turn(None)),
        Row("raw", "window", fill, turn(WINDOW)),
        Row("raw", "full", fill, full),
    ]
    return rows, connection.close


def _raw_redis(prefix: str) -> tuple[list[Row], Callable[[], None]]:
    import redis

    client = redis.Redis.from_url(REDIS)

    async def fill(session_id: str, count: int) -> None:
        for part in batches(count, 2000):
            client.rpush(prefix + session_id, *[payload(kind_of(n), n) for n in part])

    def load(session_id: str, limit: int | None) -> list[Any]:
        values = client.lrange(prefix + session_id, 0 if limit is None else -limit, -1)
        return [json.loads(value) for value in values]

    def turn(limit: int | None) -> Turn:
        async def go(session_id: str, number: int) -> None:
            load(session_id, limit)
            client.rpush(prefix + session_id, *[data for _, data in _raw_rows(number)])

        return go

    async def full(session_id: str, number: int) -> None:
        load(session_id, None)

    def close() -> None:
        keys = list(client.scan_iter(match=prefix + "*", count=1000))
        for part in range(0, len(keys), 500):
            client.unlink(*keys[part : part + 500])
        client.close()

    rows = [
        Row("raw", "whole", fill, turn(None)),
        Row("raw", "window", fill, turn(WINDOW)),
        Row("raw", "full", fill, full),
    ]
    return rows, close


def _raw_postgres(schema: str) -> tuple[list[Row], Callable[[], None]]:
    import psycopg

    connection = psycopg.connect(POSTGRES, autocommit=True)
    connection.execute(f"CREATE SCHEMA {schema}")
    table = f"{schema}.m"
    connection.execute(
        f"CREATE TABLE {table} (session_id text NOT NULL, seq bigint GENERATED ALWAYS AS "
        "IDENTITY, message_id text NOT NULL, data bytea NOT NULL, PRIMARY KEY (session_id, seq))"
    )

    async def fill(session_id: str, count: int) -> None:
        with connection.cursor() as cursor:
            cursor.executemany(
                f"INSERT INTO {table} (session_id, message_id, data) VALUES (%s, %s, %s)",
                [(session_id, f"h{n}", payload(kind_of(n), n)) for n in range(count)],
            )

    def load(session_id: str, limit: int | None) -> list[Any]:
        with connection.cursor(binary=True) as cursor:
            if limit is None:
                cursor.execute(
                    f"SELECT message_id, data FROM {table} WHERE session_id = %s ORDER BY seq",
                    (session_id,),
                    prepare=True,
                )
                rows = cursor.fetchall()
            else:
                cursor.execute(
                    f"SELECT message_id, data FROM {table} WHERE session_id = %s "
                    "ORDER BY seq DESC LIMIT %s",
                    (session_id, limit),
                    prepare=True,
                )
                rows = cursor.fetchall()
                rows.reverse()
        return [json.loads(bytes(data)) for _, data in rows]

    def turn(limit: int | None) -> Turn:
        async def go(session_id: str, number: int) -> None:
            load(session_id, limit)
            (a, adata), (b, bdata) = _raw_rows(number)
            connection.execute(
                f"INSERT INTO {table} (session_id, message_id, data) VALUES (%s, %s, %s), "
                "(%s, %s, %s)",
                (session_id, a, adata, session_id, b, bdata),
                prepare=True,
            )

        return go

    async def full(session_id: str, number: int) -> None:
        load(session_id, None)

    def close() -> None:
        connection.execute(f"DROP SCHEMA {schema} CASCADE")
        connection.close()

    rows = [
        Row("raw", "whole", fill, turn(None)),
        Row("raw", "window", fill, turn(WINDOW)),
        Row("raw", "full", fill, full),
    ]
    return rows, close


# -- the Agents SDK ------------------------------------------------------------------------


def _agents_rows(make: Callable[[str], Any]) -> list[Row]:
    sessions: dict[str, Any] = {}

    def session_of(session_id: str) -> Any:
        if session_id not in sessions:
            sessions[session_id] = make(session_id)
        return sessions[session_id]

    async def fill(session_id: str, count: int) -> None:
        session = session_of(session_id)
        for part in batches(count, 2000):
            await session.add_items([agents_item(kind_of(n), n) for n in part])

    def turn(limit: int | None) -> Turn:
        async def go(session_id: str, number: int) -> None:
            session = session_of(session_id)
            await session.get_items() if limit is None else await session.get_items(limit=limit)
            await session.add_items([agents_item(kind, number) for kind in exchange(number)])

        return go

    return [Row("agents", "whole", fill, turn(None)), Row("agents", "window", fill, turn(WINDOW))]


# -- chatkeep ------------------------------------------------------------------------------


def _chatkeep_rows(store: Store) -> list[Row]:
    async def fill(session_id: str, count: int) -> None:
        for part in batches(count):
            await store.aappend(session_id, [record(kind_of(n), n) for n in part])

    rows = []
    for load, limit in (("whole", None), ("window", WINDOW)):
        provider = HistoryProvider(store, max_messages=limit)
        for resumed in (False, True):
            kept: dict[str, AgentSession] = {}

            def session_of(
                session_id: str, kept: dict[str, AgentSession] = kept, resumed: bool = resumed
            ) -> AgentSession:
                if resumed:
                    return AgentSession(session_id)
                if session_id not in kept:
                    kept[session_id] = AgentSession(session_id)
                return kept[session_id]

            def turn(
                provider: HistoryProvider = provider,
                session_of: Callable[[str], AgentSession] = session_of,
            ) -> Turn:
                async def go(session_id: str, number: int) -> None:
                    session = session_of(session_id)
                    asked, answered = exchange(number)
                    request = [message(asked, number)]
                    await provider.invoking(session, request)
                    await provider.invoked(session, request, [message(answered, number)])

                return go

            row = Row("chatkeep resumed" if resumed else "chatkeep kept", load, fill, turn())
            if not resumed:

                async def prepare(
                    session_id: str,
                    number: int,
                    provider: HistoryProvider = provider,
                    session_of: Callable[[str], AgentSession] = session_of,
                ) -> None:
                    for _ in range(2):  # the steady state: the view held after two loads
                        await provider.invoking(session_of(session_id), [])

                row.prepare = prepare
            rows.append(row)

    async def full(session_id: str, number: int) -> None:
        await aread_view(store, session_id)

    rows.append(Row("chatkeep read_view", "full", fill, full))
    return rows


# -- one backend ---------------------------------------------------------------------------


async def _rows(backend: str, folder: Path, stack: contextlib.AsyncExitStack) -> list[Row]:
    """Every row of ``backend``, opened in the running event loop; ``stack`` closes them."""
    token = secrets.token_hex(4)
    rows: list[Row] = []
    if backend.startswith("sqlite"):
        base = Path("/dev/shm") if backend == "sqlite" else folder
        place = Path(base) / f"ckbench-default-{token}"
        place.mkdir()
        stack.callback(_remove_folder, place)
        raw, close = _raw_sqlite(place / "raw.db")
        stack.callback(close)
        rows += raw
        from agents import SQLiteSession  # WAL, synchronous left at SQLite's FULL

        agents_path = str(place / "agents.db")
        rows += _agents_rows(lambda sid: SQLiteSession(sid, agents_path))
        store = open_store(f"sqlite:///{place / 'chatkeep.db'}")
    elif backend == "redis":
        import redis.asyncio
        from agents.extensions.memory import RedisSession

        prefix = f"ckbench-{token}-"
        raw, close = _raw_redis(prefix + "raw-")
        stack.callback(close)
        rows += raw
        client = redis.asyncio.Redis.from_url(REDIS)
        stack.push_async_callback(client.aclose)
        rows += _agents_rows(
            lambda sid: RedisSession(sid, redis_client=client, key_prefix=prefix + "agents")
        )
        store = open_store(REDIS, key_prefix=prefix + "ck:")
    else:
        from agents.extensions.memory import SQLAlchemySession
        from sqlalchemy.ext.asyncio import create_async_engine

        schema = f"ck_default_{token}"
        raw, close = _raw_postgres(schema)
        stack.callback(close)
        rows += raw
        try:
            import asyncpg  # noqa: F401

            engine = create_async_engine(
                "postgresql+asyncpg" + POSTGRES.removeprefix("postgresql"),
                connect_args={"server_settings": {"search_path": schema}},
            )
        except ImportError:  # psycopg's async driver instead
            engine = create_async_engine(
                "postgresql+psycopg" + POSTGRES.removeprefix("postgresql"),
                connect_args={"options": f"-csearch_path={schema}"},
            )
        stack.push_async_callback(engine.dispose)
        rows += _agents_rows(lambda sid: SQLAlchemySession(sid, engine=engine, create_tables=True))
        store = open_store(POSTGRES, schema=schema + "_ck")
        stack.callback(_drop_schema, schema + "_ck")
    stack.push_async_callback(store.aclose)
    rows += _chatkeep_rows(store)
    return [row for row in rows if row.load in LOADS]


def _remove_folder(place: Path) -> None:
    for path in place.iterdir():
        path.unlink()
    place.rmdir()


def _drop_schema(schema: str) -> None:
    import psycopg

    with psycopg.connect(POSTGRES, autocommit=True) as connection:
        connection.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


def _turns_per_session(length: int) -> int:
    """Turns a session takes: its history grows by at most ~20% (two messages a turn)."""
    return max(1, length // 10)


async def _measure_length(rows: list[Row], length: int, rounds: int, random: Random) -> None:
    per = _turns_per_session(length)
    count = math.ceil(rounds / per)
    plan: dict[str, list[str]] = {}
    for index, row in enumerate(rows):
        ids = [f"d{index}-{length}-{n}-{secrets.token_hex(3)}" for n in range(count)]
        plan[f"{row.name}/{row.load}"] = ids
        for session_id in ids:
            await row.fill(session_id, length)
            if row.prepare is not None:
                await row.prepare(session_id, 0)
        row.samples = []
    # What is alive now (modules, the filled sessions' caches) leaves the collector's
    # generations, so that a full collection during a turn is short whichever row it lands
    # on (as run.py does).
    gc.collect()
    gc.freeze()
    order = list(rows)
    for number in range(rounds):
        random.shuffle(order)
        for row in order:
            session_id = plan[f"{row.name}/{row.load}"][number // per]
            started = time.perf_counter()
            await row.turn(session_id, length + number)
            row.samples.append((time.perf_counter() - started) * 1000)


def measure(
    backend: str, lengths: list[int], rounds: int, seed: int, folder: Path
) -> list[dict[str, Any]]:
    """One backend: every row at every length, interleaved; a result per row and length."""
    return asyncio.run(_measure(backend, lengths, rounds, Random(seed), folder))


async def _measure(
    backend: str, lengths: list[int], rounds: int, random: Random, folder: Path
) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    async with contextlib.AsyncExitStack() as stack:
        rows = await _rows(backend, folder, stack)
        for length in lengths:
            started = time.perf_counter()
            await _measure_length(rows, length, rounds, random)
            print(
                f"[{backend}] {length:,} messages: {time.perf_counter() - started:.0f} s",
                flush=True,
            )
            for row in rows:
                out.append(
                    {
                        "backend": backend,
                        "length": length,
                        "row": row.name,
                        "load": row.load,
                        "turn": summary(row.samples),
                    }
                )
    return out


# -- the table and the targets --------------------------------------------------------------


def _find(rows: list[dict[str, Any]], backend: str, length: int, name: str, load: str) -> Any:
    for row in rows:
        if (row["backend"], row["length"], row["row"], row["load"]) == (
            backend,
            length,
            name,
            load,
        ):
            return row["turn"]
    return None


def table(rows: list[dict[str, Any]]) -> Iterator[str]:
    """The rows as Markdown, ratios to raw, then each target met or not."""
    yield "| backend | messages | load | raw | Agents SDK | chatkeep kept | chatkeep resumed |"
    yield "|---|---:|---|---:|---:|---:|---:|"
    keys = sorted(
        {(r["backend"], r["length"]) for r in rows}, key=lambda k: (BACKENDS.index(k[0]), k[1])
    )
    for backend, length in keys:
        for load in ("whole", "window", "full"):
            raw = _find(rows, backend, length, "raw", load)
            if raw is None:
                continue
            cells = [f"{raw['median']:.2f} ({raw['p99']:.2f})"]
            names = (
                ("agents", "chatkeep kept", "chatkeep resumed")
                if load != "full"
                else ("-", "chatkeep read_view", "-")
            )
            for name in names:
                found = _find(rows, backend, length, name, load)
                if found is None:
                    cells.append("")
                    continue
                ratio = found["median"] / raw["median"]
                cells.append(f"{found['median']:.2f} ({found['p99']:.2f}) = {ratio:.2f}x")
            yield f"| {backend} | {length:,} | {load} | " + " | ".join(cells) + " |"
    yield ""
    yield "Targets (medians): chatkeep <= 1.3x raw and >= 1.5x faster than the Agents SDK row;"
    yield "read_view (full) <= 1.3x raw from 1,000 messages."
    yield ""
    for backend, length in keys:
        for load in ("whole", "window"):
            raw = _find(rows, backend, length, "raw", load)
            peer = _find(rows, backend, length, "agents", load)
            for name in ("chatkeep kept", "chatkeep resumed"):
                ours = _find(rows, backend, length, name, load)
                if raw is None or ours is None:
                    continue
                ratio = ours["median"] / raw["median"]
                line = f"- {backend} {length:,} {load} {name}: {ratio:.2f}x raw " + (
                    "met" if ratio <= 1.3 else "NOT MET"
                )
                if peer is not None:
                    faster = peer["median"] / ours["median"]
                    line += f"; {faster:.2f}x faster than the Agents SDK " + (
                        "met" if faster >= 1.5 else "NOT MET"
                    )
                yield line
        raw = _find(rows, backend, length, "raw", "full")
        ours = _find(rows, backend, length, "chatkeep read_view", "full")
        if raw is not None and ours is not None and length >= 1000:
            ratio = ours["median"] / raw["median"]
            yield f"- {backend} {length:,} full read_view: {ratio:.2f}x raw " + (
                "met" if ratio <= 1.3 else "NOT MET"
            )


def main(argv: list[str] | None = None) -> int:
    """``python benchmarks/run.py default-path [--loads whole,window,full] ...``."""
    global LOADS
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--loads", default=",".join(LOADS))
    known, rest = parser.parse_known_args(argv)
    asked = tuple(load for load in known.loads.split(",") if load)
    unknown = set(asked) - set(LOADS)
    if unknown:
        parser.error(f"unknown load(s) {sorted(unknown)}; choose from {', '.join(LOADS)}")
    LOADS = asked
    return run(
        rest,
        description="issue 29: the default path, whole history and window, kept and resumed",
        backends=BACKENDS,
        measure=measure,
        table=table,
        rounds=100,
        quick_rounds=20,
    )
