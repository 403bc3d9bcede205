"""Google ADK session services: chatkeep's ``ChatkeepSessionService`` against ADK's own on
the same backend, side by side in one interleaved run.

    python benchmarks/run.py google_adk [--quick] [--backends memory,sqlite,postgres]
                                        [--lengths 10,100,1000] [--rounds 100] [--json f]

**A turn** is what ADK's ``Runner`` asks of its session service for one user message and
one model reply: ``get_session`` (the whole session, as the runner loads it without a
``get_session_config``), ``append_event`` of the user's message, ``append_event`` of the
model's reply (text and usage metadata). The **window turn** is the same with
``GetSessionConfig(num_recent_events=50)`` (``RunConfig.get_session_config``). Each
service's session already holds ``length`` events (half user messages, half replies, a
``user:`` state change every tenth event) when its turns are timed; the services take
turns in a shuffled order every round, on one event loop.

Peers: ``InMemorySessionService`` (memory), ``DatabaseSessionService`` (SQLAlchemy) on
``sqlite+aiosqlite`` in its own file of the same folder and on PostgreSQL in its own schema
of the same server (``asyncpg`` when installed, else ``psycopg``'s async driver), and
``SqliteSessionService`` (aiosqlite) as a second SQLite peer.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import statistics
import tempfile
import time
from collections.abc import Iterator
from contextlib import AsyncExitStack, suppress
from dataclasses import dataclass
from pathlib import Path
from random import Random
from typing import Any

POSTGRES = (
    os.environ.get("CHATKEEP_TEST_POSTGRES_URL") or "postgresql://postgres@127.0.0.1:5432/test"
)
BACKENDS = ["memory", "sqlite", "postgres"]
APP, USER = "bench", "user"
WINDOW = 50
TEXT = "lorem ipsum dolor sit amet " * 10  # ~270 characters per message


@dataclass
class Subject:
    """One service and the session it is timed on."""

    name: str
    service: Any
    session_id: str = ""
    step: int = 0


def _event(step: int) -> Any:
    from google.adk.events.event import Event
    from google.adk.events.event_actions import EventActions
    from google.genai import types

    user = step % 2 == 0
    content = types.Content(
        role="user" if user else "model", parts=[types.Part(text=f"{step}: {TEXT}")]
    )
    fields: dict[str, Any] = {}
    if not user:
        fields["usage_metadata"] = types.GenerateContentResponseUsageMetadata(
            prompt_token_count=step, candidates_token_count=40, total_token_count=step + 40
        )
    if step % 10 == 0:
        fields["actions"] = EventActions(state_delta={"user:turns": step, "last": step})
    return Event(
        invocation_id=f"inv-{step // 2}",
        author="user" if user else "assistant",
        content=content,
        **fields,
    )


async def _turn(subject: Subject, config: Any) -> None:
    session = await subject.service.get_session(
        app_name=APP, user_id=USER, session_id=subject.session_id, config=config
    )
    for _ in range(2):
        await subject.service.append_event(session, _event(subject.step))
        subject.step += 1


async def _subjects(
    backend: str, stack: AsyncExitStack, workdir: Path, token: str
) -> list[Subject]:
    from google.adk.sessions import InMemorySessionService

    from chatkeep.google_adk import ChatkeepSessionService

    subjects: list[Subject] = []

    async def chatkeep(name: str, url: str) -> None:
        service = ChatkeepSessionService(url=url)
        stack.push_async_callback(service.close)
        subjects.append(Subject(name, service))

    if backend == "memory":
        await chatkeep("chatkeep", "memory://")
        subjects.append(Subject("InMemorySessionService", InMemorySessionService()))
    elif backend == "sqlite":
        from google.adk.sessions.database_session_service import DatabaseSessionService
        from google.adk.sessions.sqlite_session_service import SqliteSessionService

        await chatkeep("chatkeep", f"sqlite:///{workdir / 'chatkeep.db'}")
        await chatkeep(
            "chatkeep synchronous=normal", f"sqlite:///{workdir / 'normal.db'}?synchronous=normal"
        )
        database = DatabaseSessionService(f"sqlite+aiosqlite:///{workdir / 'adk-db.db'}")
        stack.push_async_callback(database.close)
        subjects.append(Subject("DatabaseSessionService", database))
        subjects.append(
            Subject("SqliteSessionService", SqliteSessionService(str(workdir / "adk-sqlite.db")))
        )
    elif backend == "postgres":
        import psycopg
        from google.adk.sessions.database_session_service import DatabaseSessionService

        ours, theirs = f"ck_adkbench_{token}", f"adk_adkbench_{token}"
        with psycopg.connect(POSTGRES, autocommit=True) as conn:
            conn.execute(f'CREATE SCHEMA "{theirs}"')

        def drop() -> None:
            with psycopg.connect(POSTGRES, autocommit=True) as conn:
                for schema in (ours, theirs):
                    conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')

        stack.callback(drop)
        separator = "&" if "?" in POSTGRES else "?"
        await chatkeep("chatkeep", f"{POSTGRES}{separator}schema={ours}")
        try:
            import asyncpg  # noqa: F401

            url = POSTGRES.replace("postgresql://", "postgresql+asyncpg://", 1)
            engine_args: dict[str, Any] = {"server_settings": {"search_path": theirs}}
        except ImportError:
            url = POSTGRES.replace("postgresql://", "postgresql+psycopg://", 1)
            engine_args = {"options": f"-csearch_path={theirs}"}
        database = DatabaseSessionService(url, connect_args=engine_args)
        stack.push_async_callback(database.close)
        driver = url.split("://", 1)[0].split("+")[1]
        subjects.append(Subject(f"DatabaseSessionService ({driver})", database))
    return subjects


def _summary(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return {"median": statistics.median(ordered), "p99": p99}


async def measure(
    backend: str, lengths: list[int], rounds: int, seed: int, workdir: Path
) -> list[dict[str, Any]]:
    """Rows ``{backend, service, length, turn, window}`` for one backend."""
    from google.adk.sessions.base_session_service import GetSessionConfig

    rows: list[dict[str, Any]] = []
    random = Random(seed)
    window = GetSessionConfig(num_recent_events=WINDOW)
    async with AsyncExitStack() as stack:
        subjects = await _subjects(backend, stack, workdir, secrets.token_hex(4))
        for length in lengths:
            for subject in subjects:  # a session of `length` events, for each service
                session = await subject.service.create_session(app_name=APP, user_id=USER)
                subject.session_id, subject.step = session.id, 0
                for _ in range(length):
                    await subject.service.append_event(session, _event(subject.step))
                    subject.step += 1
            turns: dict[str, list[float]] = {s.name: [] for s in subjects}
            windows: dict[str, list[float]] = {s.name: [] for s in subjects}
            for _round in range(rounds):
                order = list(subjects)
                random.shuffle(order)
                for subject in order:
                    for config, samples in ((None, turns), (window, windows)):
                        started = time.perf_counter()
                        await _turn(subject, config)
                        samples[subject.name].append((time.perf_counter() - started) * 1000)
            for subject in subjects:
                rows.append(
                    {
                        "backend": backend,
                        "service": subject.name,
                        "length": length,
                        "turn": _summary(turns[subject.name]),
                        "window": _summary(windows[subject.name]),
                    }
                )
            print(f"[{backend}] {length} events: done", flush=True)
    return rows


def table(rows: list[dict[str, Any]]) -> Iterator[str]:
    """Markdown: per backend and length, each service's medians (p99); chatkeep's rows
    as a multiple of the first peer's (ADK's DatabaseSessionService, or the in-memory one)."""
    yield "| backend | events | service | turn ms, median (p99) | window turn ms, median (p99) |"
    yield "|---|---:|---|---:|---:|"
    for row in rows:
        peer = next(
            (
                r
                for r in rows
                if r["backend"] == row["backend"]
                and r["length"] == row["length"]
                and not r["service"].startswith("chatkeep")
            ),
            None,
        )

        def cell(kind: str, row: dict[str, Any] = row, peer: dict[str, Any] | None = peer) -> str:
            text = f"{row[kind]['median']:.2f} ({row[kind]['p99']:.2f})"
            if row["service"].startswith("chatkeep") and peer is not None:
                text += f" = {row[kind]['median'] / peer[kind]['median']:.2f}x"
            return text

        where = f"| {row['backend']} | {row['length']:,} | {row['service']} |"
        yield f"{where} {cell('turn')} | {cell('window')} |"


def main(argv: list[str] | None = None) -> int:
    """Run the ADK session service benchmark; 0 unless nothing could be measured."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds and lengths")
    parser.add_argument("--backends", default=",".join(BACKENDS))
    parser.add_argument("--lengths", default="10,100,1000")
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    lengths = [int(x) for x in args.lengths.split(",") if x]
    rounds = args.rounds
    if args.quick:
        lengths, rounds = [min(lengths), max(lengths)], min(rounds, 30)
    import logging
    import warnings

    warnings.filterwarnings("ignore")
    logging.getLogger("google_adk").setLevel(logging.ERROR)
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="ckbench-adk-") as folder:
        for backend in [b.strip() for b in args.backends.split(",") if b.strip()]:
            if backend not in BACKENDS:
                parser.error(f"unknown backend {backend!r}; choose from {', '.join(BACKENDS)}")
            try:
                rows += asyncio.run(measure(backend, lengths, rounds, args.seed, Path(folder)))
            except (OSError, ImportError) as exc:
                print(f"[{backend}] skipped: {type(exc).__name__}: {exc}")
            except Exception as exc:  # a server missing: say so, go on with the others
                if type(exc).__module__.split(".")[0] != "psycopg":
                    raise
                print(f"[{backend}] skipped: {type(exc).__name__}: {exc}")
    print()
    for line in table(rows):
        print(line)
    if args.json:
        with suppress(OSError):
            args.json.write_text(json.dumps(rows, indent=2))
    return 0 if rows else 1
