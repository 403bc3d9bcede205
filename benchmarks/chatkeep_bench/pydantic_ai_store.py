"""Pydantic AI conversation stores: chatkeep's ``ChatkeepConversationStore`` against a
hand-written SQL ``ConversationStore`` of the five primitives (one row per entry, one per
record) on SQLite and PostgreSQL, and against ``InMemoryConversationStore`` on chatkeep's
memory backend, side by side in one interleaved run.

    python benchmarks/run.py pydantic-ai [--quick] [--backends memory,sqlite,postgres]
                                         [--lengths 10,100,1000] [--rounds 100] [--json f]

A turn is what an application does around each run: ``store.load(id)`` (the whole
history), two new messages (a request and a response of ~300 bytes each, as a run adds),
``store.save(conversation)``. Each store answers one turn per round, in a shuffled order
every round, on a conversation of its own that holds ``length`` messages (one per round,
all seeded before the timed rounds). The SQL peer is
what the issue asks for: the five primitives and nothing else (``read_history`` is the
base class's, one ``read_entry`` per entry), each write one transaction that checks the
revision, inserts the entries and upserts the record; it calls its driver directly (no
thread hop). Both SQLite rows sync each commit the same way (``synchronous=FULL``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Sequence
from contextlib import ExitStack
from datetime import datetime, timezone
from pathlib import Path
from random import Random
from typing import Any

from .interleaved import Target, target_lines

POSTGRES = (
    os.environ.get("CHATKEEP_TEST_POSTGRES_URL") or "postgresql://postgres@127.0.0.1:5432/test"
)
BACKENDS = ["memory", "sqlite", "postgres"]


def _messages(start: int, count: int) -> list[Any]:
    from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, UserPromptPart
    from pydantic_ai.usage import RequestUsage

    now = datetime.now(timezone.utc)
    out: list[Any] = []
    for n in range(start, start + count):
        text = f"message {n}: " + "lorem ipsum dolor sit amet " * 10
        if n % 2 == 0:
            out.append(ModelRequest(parts=[UserPromptPart(text, timestamp=now)], timestamp=now))
        else:
            out.append(
                ModelResponse(
                    parts=[TextPart(text)],
                    usage=RequestUsage(input_tokens=n, output_tokens=30),
                    model_name="bench",
                    timestamp=now,
                )
            )
    return out


def sql_store(kind: str, target: str) -> Any:
    """The hand-written peer: ``kind`` is ``sqlite`` (``target`` a file) or ``postgres``
    (``target`` a schema on :data:`POSTGRES`)."""
    import pydantic
    from pydantic_ai.conversation_store import (
        ConversationConflict,
        ConversationEntry,
        ConversationRecord,
        ConversationStore,
    )
    from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter
    from pydantic_core import to_json

    record_adapter: Any = pydantic.TypeAdapter(ConversationRecord)
    # One message with ModelMessagesTypeAdapter's own settings (bytes as base64).
    message_adapter: Any = pydantic.TypeAdapter(
        ModelMessage, config=pydantic.ConfigDict(ser_json_bytes="base64", val_json_bytes="base64")
    )

    class SQLConversationStore(ConversationStore):
        def __init__(self) -> None:
            if kind == "sqlite":
                self.db: Any = sqlite3.connect(target, isolation_level=None)
                self.db.execute("PRAGMA journal_mode=WAL")
                self.db.execute("PRAGMA synchronous=FULL")
                self.mark = "?"
            else:
                import psycopg

                self.db = psycopg.connect(POSTGRES, autocommit=True)
                self.db.execute(f'CREATE SCHEMA IF NOT EXISTS "{target}"')
                self.db.execute(f'SET search_path TO "{target}"')
                self.mark = "%s"
            self.db.execute(
                "CREATE TABLE IF NOT EXISTS entries (id TEXT PRIMARY KEY, parent_id TEXT, "
                "message TEXT NOT NULL)"
            )
            self.db.execute(
                "CREATE TABLE IF NOT EXISTS records (conversation_id TEXT PRIMARY KEY, "
                "revision TEXT NOT NULL, scope TEXT, updated_at TEXT NOT NULL, data TEXT NOT NULL)"
            )

        def _sql(self, text: str) -> str:
            return text.replace("?", self.mark)

        async def read_record(self, conversation_id: str) -> ConversationRecord | None:
            row = self.db.execute(
                self._sql("SELECT data FROM records WHERE conversation_id = ?"), (conversation_id,)
            ).fetchone()
            return None if row is None else record_adapter.validate_json(row[0])

        async def read_records(
            self, *, scope: str | None = None, limit: int | None = None
        ) -> Sequence[ConversationRecord]:
            rows = self.db.execute("SELECT data FROM records ORDER BY updated_at DESC").fetchall()
            records = [record_adapter.validate_json(row[0]) for row in rows]
            return [r for r in records if scope is None or r.scope == scope][:limit]

        async def write_record(
            self,
            record: ConversationRecord,
            *,
            new_entries: Sequence[ConversationEntry] = (),
            expected_revision: str | None,
        ) -> None:
            db = self.db
            begin = "BEGIN IMMEDIATE" if kind == "sqlite" else "BEGIN"
            lock = "" if kind == "sqlite" else " FOR UPDATE"
            db.execute(begin)
            try:
                row = db.execute(
                    self._sql(f"SELECT revision FROM records WHERE conversation_id = ?{lock}"),
                    (record.conversation_id,),
                ).fetchone()
                if (row[0] if row else None) != expected_revision:
                    raise ConversationConflict(record.conversation_id)
                if new_entries:
                    # One encode per message, stored as written (read back as `[<row>]`).
                    rows = [
                        (e.id, e.parent_id, message_adapter.dump_json(e.message).decode())
                        for e in new_entries
                    ]
                    cursor = db.cursor()
                    cursor.executemany(
                        self._sql("INSERT INTO entries (id, parent_id, message) VALUES (?, ?, ?)"),
                        rows,
                    )
                db.execute(
                    self._sql(
                        "INSERT INTO records (conversation_id, revision, scope, updated_at, data) "
                        "VALUES (?, ?, ?, ?, ?) ON CONFLICT (conversation_id) DO UPDATE SET "
                        "revision = excluded.revision, scope = excluded.scope, "
                        "updated_at = excluded.updated_at, data = excluded.data"
                    ),
                    (
                        record.conversation_id,
                        record.revision,
                        record.scope,
                        record.updated_at.isoformat(),
                        to_json(record).decode(),
                    ),
                )
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")

        async def delete_record(self, conversation_id: str, *, expected_revision: str) -> None:
            raise NotImplementedError  # not part of the turn

        async def read_entry(self, entry_id: str) -> ConversationEntry:
            row = self.db.execute(
                self._sql("SELECT parent_id, message FROM entries WHERE id = ?"), (entry_id,)
            ).fetchone()
            if row is None:
                raise KeyError(entry_id)
            (message,) = ModelMessagesTypeAdapter.validate_json(f"[{row[1]}]")
            return ConversationEntry(id=entry_id, parent_id=row[0], message=message)

        def close(self) -> None:
            if kind == "postgres":
                self.db.execute(f'DROP SCHEMA IF EXISTS "{target}" CASCADE')
            self.db.close()

    return SQLConversationStore()


async def _turn(store: Any, conversation_id: str, start: int) -> tuple[float, float]:
    """One turn; its wall-clock time and this process's CPU time (the CPU time leaves out
    the waits a loaded machine's scheduler adds, and a server's own work)."""
    added = _messages(start, 2)
    began, cpu = time.perf_counter(), time.process_time()
    conversation = await store.load(conversation_id)
    conversation.messages.extend(added)
    await store.save(conversation)
    return time.perf_counter() - began, time.process_time() - cpu


async def _seed(store: Any, conversation_id: str, length: int) -> None:
    from pydantic_ai.conversation import Conversation

    await store.save(Conversation(messages=_messages(0, length), conversation_id=conversation_id))


def _stores(backend: str, folder: Path, cleanup: ExitStack) -> dict[str, Any]:
    from pydantic_ai.conversation_store import InMemoryConversationStore

    from chatkeep.pydantic_ai import ChatkeepConversationStore

    token = secrets.token_hex(4)
    if backend == "memory":
        stores = {
            "chatkeep (memory://)": ChatkeepConversationStore(url="memory://"),
            "InMemoryConversationStore": InMemoryConversationStore(),
        }
    elif backend == "sqlite":
        stores = {
            "chatkeep (sqlite)": ChatkeepConversationStore(url=f"sqlite:///{folder / 'ck.db'}"),
            "SQL peer (sqlite3)": sql_store("sqlite", str(folder / f"peer-{token}.db")),
        }
    else:
        import psycopg

        schema = f"bench_pai_{token}"
        url = f"{POSTGRES}?schema={schema}"

        def drop() -> None:
            with psycopg.connect(POSTGRES, autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')

        cleanup.callback(drop)
        stores = {
            "chatkeep (postgres)": ChatkeepConversationStore(url=url),
            "SQL peer (psycopg)": sql_store("postgres", f"bench_peer_{token}"),
        }
    for store in stores.values():
        if hasattr(store, "close"):
            cleanup.callback(store.close)
    return stores


async def _run(
    backend: str, length: int, rounds: int, seed: int, where: str | None
) -> dict[str, list[tuple[float, float]]]:
    random = Random(seed)
    with tempfile.TemporaryDirectory(dir=where) as folder, ExitStack() as cleanup:
        stores = _stores(backend, Path(folder), cleanup)
        # One conversation of `length` messages per round (each turn finds exactly that).
        ids = {name: [f"b-{secrets.token_hex(5)}" for _ in range(rounds + 1)] for name in stores}
        for name, store in stores.items():
            for conversation_id in ids[name]:
                await _seed(store, conversation_id, length)
            await _turn(store, ids[name][-1], length)  # warm up: first connections
        times: dict[str, list[tuple[float, float]]] = {name: [] for name in stores}
        names = list(stores)
        for round_number in range(rounds):
            random.shuffle(names)
            for name in names:
                times[name].append(await _turn(stores[name], ids[name][round_number], length))
        return times


#: Issue 25: at least 1.5x faster than the SQL peer on SQLite and PostgreSQL, within 1.3x of
#: InMemoryConversationStore on chatkeep's memory backend (wall time of the turn).
TARGETS = [
    Target("chatkeep (sqlite)", "SQL peer (sqlite3)", "wall", 1 / 1.5, "sqlite"),
    Target("chatkeep (postgres)", "SQL peer (psycopg)", "wall", 1 / 1.5, "postgres"),
    Target("chatkeep (memory://)", "InMemoryConversationStore", "wall", 1.3, "memory"),
]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="run.py pydantic-ai")
    parser.add_argument("--quick", action="store_true", help="fewer rounds")
    parser.add_argument("--backends", default=",".join(BACKENDS))
    parser.add_argument("--lengths", default="10,100,1000")
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--json", default=None, help="also write the medians here")
    parser.add_argument(
        "--folder", default=None, help="where the SQLite files go (/dev/shm: tmpfs; default: /tmp)"
    )
    args = parser.parse_args(argv)
    rounds = args.rounds or (30 if args.quick else 100)
    report: list[dict[str, Any]] = []
    rows: list[dict[str, Any]] = []  # per store, for the targets
    print(f"Pydantic AI load + save turn, median ms over {rounds} interleaved rounds")
    for backend in args.backends.split(","):
        for length in (int(n) for n in args.lengths.split(",")):
            times = asyncio.run(_run(backend, length, rounds, length, args.folder))
            row: dict[str, Any] = {"backend": backend, "length": length}
            cells = []
            for column, label in ((0, "wall"), (1, "cpu")):
                medians = {
                    name: statistics.median(t[column] for t in values)
                    for name, values in times.items()
                }
                chatkeep = next(name for name in medians if name.startswith("chatkeep"))
                (peer,) = (name for name in medians if name != chatkeep)
                ratio = medians[peer] / medians[chatkeep]
                cells.append(
                    f"{label}: chatkeep {medians[chatkeep] * 1e3:.2f}  {peer} "
                    f"{medians[peer] * 1e3:.2f}  peer/chatkeep {ratio:.2f}x"
                )
                row[label] = {"medians_s": medians, "peer_over_chatkeep": ratio}
            for name in times:
                rows.append(
                    {
                        "backend": backend,
                        "store": name,
                        "length": length,
                        "wall": {"median": statistics.median(t[0] for t in times[name])},
                    }
                )
            print(f"{backend:8} {length:>5} msgs  " + "  |  ".join(cells))
            report.append(row)
    for line in target_lines(rows, "store", TARGETS):
        print(line)
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2))
    return 0
