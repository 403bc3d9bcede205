"""LlamaIndex chat stores and Strands sessions: chatkeep's adapters against each framework's
own persistent store on the same backend, side by side in one interleaved run (issue 26).

    python benchmarks/run.py llama-index [--quick] [--backends sqlite,redis,postgres]
    python benchmarks/run.py strands [--quick]

**llama-index**: a turn is what ``ChatMemoryBuffer`` does around one model call:
``get_messages`` (the whole conversation) then ``add_message`` twice (the user's message and
the reply, ~300 bytes each); an **edit** is ``delete_message`` of a message in the middle
then ``add_message`` (so the length stays). Peers: ``RedisChatStore``
(llama-index-storage-chat-store-redis) on the same Redis, ``PostgresChatStore``
(llama-index-storage-chat-store-postgres) on the same PostgreSQL; chatkeep's
``ChatkeepChatStore`` on SQLite has no peer row (LlamaIndex's persistent SQLite store is
another package), it is shown for reference.

**strands**: a turn is what ``RepositorySessionManager`` does when an agent answers:
``create_message`` and ``update_agent`` (the sync after each message) twice; a **restore**
is a new session manager initializing the agent (``read_session``, ``read_agent``,
``list_messages``). Peer: ``FileSessionManager`` on local disk, against
``ChatkeepSessionRepository`` on SQLite on the same disk (the default ``synchronous=full``,
one fsync per append, which the file manager never does; and ``synchronous=normal``).

Histories of 10 and 1,000 messages. Every round runs one operation of every variant in a
shuffled order, so a noisy machine slows all of them alike; medians and p99s per variant,
and each chatkeep variant's ratio to its peer (below 1.0: chatkeep is faster).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import secrets
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from random import Random
from typing import Any

POSTGRES = (
    os.environ.get("CHATKEEP_TEST_POSTGRES_URL") or "postgresql://postgres@127.0.0.1:5432/test"
)
REDIS = os.environ.get("CHATKEEP_TEST_REDIS_URL") or "redis://127.0.0.1:6379/0"
TEXT = "x" * 150  # ~300 bytes a message once stored, like the main benchmark's


@dataclass
class Variant:
    """One store under test: its name, the peer it is compared with, and its operations."""

    name: str
    peer: str | None
    operations: dict[str, Callable[[], None]]
    times: dict[str, list[float]] = field(default_factory=dict)


def _measure(variants: list[Variant], rounds: int, seed: int) -> None:
    rng = Random(seed)
    for _ in range(rounds):
        order = list(variants)
        rng.shuffle(order)
        for variant in order:
            for operation, run in variant.operations.items():
                start = time.perf_counter()
                run()
                variant.times.setdefault(operation, []).append(time.perf_counter() - start)


def _p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


def _report(title: str, variants: list[Variant]) -> list[str]:
    lines = [
        f"\n{title}",
        f"{'variant':<44} {'operation':<10} {'median ms':>10} {'p99 ms':>9}  ratio",
    ]
    medians = {
        (v.name, op): statistics.median(times) for v in variants for op, times in v.times.items()
    }
    for variant in variants:
        for operation, times in variant.times.items():
            median = medians[(variant.name, operation)]
            ratio = ""
            if variant.peer is not None and (variant.peer, operation) in medians:
                ratio = f"{median / medians[(variant.peer, operation)]:.2f}x {variant.peer}"
            lines.append(
                f"{variant.name:<44} {operation:<10} {median * 1000:>10.3f} "
                f"{_p99(times) * 1000:>9.3f}  {ratio}"
            )
    return lines


# -- LlamaIndex -------------------------------------------------------------------------------


def _chat_messages(count: int) -> list[Any]:
    from llama_index.core.llms import ChatMessage

    return [
        ChatMessage(role="user" if i % 2 == 0 else "assistant", content=f"{i} {TEXT}")
        for i in range(count)
    ]


def _llama_operations(chat_store: Any, key: str, length: int) -> dict[str, Callable[[], None]]:
    chat_store.set_messages(key, _chat_messages(length))
    user, reply = _chat_messages(2)

    def turn() -> None:
        chat_store.get_messages(key)
        chat_store.add_message(key, user)
        chat_store.add_message(key, reply)

    def edit() -> None:
        chat_store.delete_message(key, length // 2)
        chat_store.add_message(key, user)

    return {"turn": turn, "edit": edit}


def _llama_variants(
    backends: list[str], length: int, token: str, cleanup: contextlib.ExitStack, workdir: Path
) -> list[Variant]:
    from chatkeep.core import open_store
    from chatkeep.llama_index import ChatkeepChatStore

    variants = []
    key = f"ckbench-{token}-{length}"
    if "sqlite" in backends:
        store = cleanup.enter_context(open_store(f"sqlite:///{workdir / f'li-{length}.db'}"))
        operations = _llama_operations(ChatkeepChatStore(store=store), key, length)
        variants.append(Variant("chatkeep ChatkeepChatStore (sqlite)", None, operations))
    if "redis" in backends:
        from llama_index.storage.chat_store.redis import RedisChatStore

        store = cleanup.enter_context(open_store(REDIS, namespace=f"ckbench-{token}"))
        operations = _llama_operations(ChatkeepChatStore(store=store), key, length)
        variants.append(Variant("chatkeep ChatkeepChatStore (redis)", "RedisChatStore", operations))
        peer = RedisChatStore(redis_url=REDIS)
        cleanup.callback(peer._redis_client.delete, key)
        variants.append(Variant("RedisChatStore", None, _llama_operations(peer, key, length)))
    if "postgres" in backends:
        import psycopg
        from llama_index.storage.chat_store.postgres import PostgresChatStore

        schema = f"ck_bench_{token}"
        store = cleanup.enter_context(open_store(POSTGRES, schema=schema))

        def drop_ours(schema: str = schema) -> None:
            with psycopg.connect(POSTGRES, autocommit=True) as connection:
                connection.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")

        cleanup.callback(drop_ours)
        operations = _llama_operations(ChatkeepChatStore(store=store), key, length)
        variants.append(
            Variant("chatkeep ChatkeepChatStore (postgres)", "PostgresChatStore", operations)
        )
        base = POSTGRES.split("://", 1)[1]
        peer = PostgresChatStore.from_params(
            connection_string=f"postgresql+psycopg://{base}",
            async_connection_string=f"postgresql+asyncpg://{base}",
            # public: its delete_message names the table without the schema
            schema_name="public",
            table_name=f"li_bench_{token}_{length}",
        )

        def drop(table: str = f"li_bench_{token}_{length}") -> None:
            with psycopg.connect(POSTGRES, autocommit=True) as connection:
                for name in (table, f"data_{table}"):
                    connection.execute(f"DROP TABLE IF EXISTS public.{name}")

        cleanup.callback(drop)
        variants.append(Variant("PostgresChatStore", None, _llama_operations(peer, key, length)))
    return variants


# -- Strands ----------------------------------------------------------------------------------


def _strands_operations(make: Callable[[], Any], session_id: str, length: int) -> dict[str, Any]:
    from strands.session.repository_session_manager import RepositorySessionManager
    from strands.types.session import Session, SessionAgent, SessionMessage, SessionType

    repository = make()
    repository.create_session(Session(session_id=session_id, session_type=SessionType.AGENT))
    from strands.agent.conversation_manager import SlidingWindowConversationManager

    agent = SessionAgent(
        agent_id="a",
        state={"visits": 0},
        conversation_manager_state=SlidingWindowConversationManager().get_state(),
    )
    repository.create_agent(session_id, agent)
    for i in range(length):
        message = {"role": "user" if i % 2 == 0 else "assistant", "content": [{"text": TEXT}]}
        repository.create_message(session_id, "a", SessionMessage(message=message, message_id=i))
    next_id = [length]

    def turn() -> None:
        for role in ("user", "assistant"):
            message = {"role": role, "content": [{"text": TEXT}]}
            repository.create_message(
                session_id, "a", SessionMessage(message=message, message_id=next_id[0])
            )
            next_id[0] += 1
            agent.state["visits"] = next_id[0]
            repository.update_agent(session_id, agent)

    def restore() -> None:
        from strands import Agent

        manager = RepositorySessionManager(session_id=session_id, session_repository=make())
        manager.initialize(Agent(agent_id="a", callback_handler=None))

    return {"turn": turn, "restore": restore}


def _strands_variants(length: int, token: str, workdir: Path) -> list[Variant]:
    from strands.session.file_session_manager import FileSessionManager

    from chatkeep.core import open_store
    from chatkeep.strands import ChatkeepSessionRepository

    session_id = f"ckbench-{token}-{length}"
    files = workdir / f"files-{length}"
    variants = [
        Variant(
            "FileSessionManager (disk)",
            None,
            _strands_operations(
                lambda: FileSessionManager.__new__(FileSessionManager)._bench_init(files),
                session_id,
                length,
            ),
        )
    ]
    for synchronous in ("full", "normal"):
        url = (
            f"sqlite:///{workdir / f'strands-{length}-{synchronous}.db'}?synchronous={synchronous}"
        )
        store = open_store(url)
        variants.append(
            Variant(
                f"chatkeep repository (sqlite, synchronous={synchronous})",
                "FileSessionManager (disk)",
                _strands_operations(
                    lambda store=store: ChatkeepSessionRepository(store=store), session_id, length
                ),
            )
        )
    return variants


def _file_repository(self: Any, storage_dir: Path) -> Any:
    """A FileSessionManager used as a bare repository (no session of its own)."""
    storage_dir.mkdir(parents=True, exist_ok=True)
    self.storage_dir = str(storage_dir)
    return self


# -- the command ------------------------------------------------------------------------------


def main(argv: list[str], which: str) -> int:
    parser = argparse.ArgumentParser(prog=f"run.py {which}")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--backends", default="sqlite,redis,postgres")
    parser.add_argument("--lengths", default="10,1000")
    parser.add_argument("--rounds", type=int, default=0)
    parser.add_argument("--seed", type=int, default=26)
    args = parser.parse_args(argv)
    rounds = args.rounds or (40 if args.quick else 200)
    token = secrets.token_hex(4)
    workdir = Path(tempfile.mkdtemp(prefix=f"ckbench-{token}-", dir=os.getcwd()))
    lines = [
        f"{which}: {rounds} interleaved rounds per length (one operation of every variant a "
        f"round, shuffled); files in {workdir} (local disk)"
    ]
    try:
        for length in [int(n) for n in args.lengths.split(",")]:
            with contextlib.ExitStack() as cleanup:
                if which == "llama-index":
                    variants = _llama_variants(
                        args.backends.split(","), length, token, cleanup, workdir
                    )
                else:
                    from strands.session.file_session_manager import FileSessionManager

                    FileSessionManager._bench_init = _file_repository  # type: ignore[attr-defined]
                    variants = _strands_variants(length, token, workdir)
                _measure(variants, rounds, args.seed)
                lines += _report(f"history of {length} messages", variants)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print("\n".join(lines))
    return 0
