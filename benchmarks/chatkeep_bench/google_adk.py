"""Google ADK session services: chatkeep's ``ChatkeepSessionService`` against ADK's own on
the same backend, side by side in one interleaved run.

    python benchmarks/run.py google-adk [--quick] [--backends memory,sqlite,postgres]
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

import asyncio
import os
import secrets
import time
from collections.abc import Iterator
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from random import Random
from typing import Any

from .interleaved import Target, ratio_table, run, summary, target_lines

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
                        "turn": summary(turns[subject.name]),
                        "window": summary(windows[subject.name]),
                    }
                )
            print(f"[{backend}] {length} events: done", flush=True)
    return rows


def table(rows: list[dict[str, Any]]) -> Iterator[str]:
    """Markdown: per backend and length, each service's medians (p99); chatkeep's rows
    as a multiple of the first peer's (ADK's DatabaseSessionService, or the in-memory one)."""
    return ratio_table(
        rows,
        "service",
        "events",
        [("turn", "turn ms, median (p99)"), ("window", "window turn ms, median (p99)")],
    )


#: Issue 25: the service at least as fast as ADK's DatabaseSessionService on SQLite and
#: PostgreSQL (the default turn and the window turn; the default chatkeep row).
TARGETS = [
    Target("chatkeep", "DatabaseSessionService", column, 1.0, backend)
    for backend in ("sqlite", "postgres")
    for column in ("turn", "window")
]


def main(argv: list[str] | None = None) -> int:
    """Run the ADK session service benchmark; 0 unless nothing could be measured."""
    import logging

    logging.getLogger("google_adk").setLevel(logging.ERROR)

    def measure_blocking(
        backend: str, lengths: list[int], rounds: int, seed: int, folder: Path
    ) -> list[dict[str, Any]]:
        return asyncio.run(measure(backend, lengths, rounds, seed, folder))

    return run(
        argv,
        description=(__doc__ or "").split("\n\n")[0],
        backends=BACKENDS,
        measure=measure_blocking,
        table=table,
        rounds=100,
        quick_rounds=30,
        targets=lambda rows: target_lines(rows, "service", TARGETS),
    )
