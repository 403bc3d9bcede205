"""LlamaIndex chat stores and Strands sessions: chatkeep's adapters against each framework's
own persistent store on the same backend, side by side in one interleaved run (issue 26).

    python benchmarks/run.py llama-index [--quick] [--backends sqlite,redis,postgres]
                                         [--lengths 10,1000] [--rounds 200] [--json f]
    python benchmarks/run.py strands [--quick] [--backends disk,tmpfs] [...]

**llama-index**: a turn is what ``ChatMemoryBuffer`` does around one model call:
``get_messages`` (the whole conversation) then ``add_message`` twice (the user's message and
the reply, ~300 bytes each); an **edit** is ``delete_message`` of a message in the middle
then ``add_message`` (so the length stays). Peers: ``RedisChatStore``
(llama-index-storage-chat-store-redis) on the same Redis, ``PostgresChatStore``
(llama-index-storage-chat-store-postgres) on the same PostgreSQL; chatkeep's
``ChatkeepChatStore`` on SQLite has no peer row (LlamaIndex's persistent SQLite store is
another package), it is shown for reference.

**strands**: a turn is what ``RepositorySessionManager`` does when an agent answers:
``create_message`` and ``update_agent`` (the sync after each message) twice (a **chat** turn
is the two ``create_message`` alone: the manager skips ``update_agent`` when the agent's
state, interrupt state and conversation-manager state are unchanged); a **restore**
is a new session manager initializing the agent (``read_session``, ``read_agent``,
``list_messages``). Peer: ``FileSessionManager``, against ``ChatkeepSessionRepository`` on
a SQLite file in the same folder (the default ``synchronous=full``, one fsync per append,
which the file manager never does; and ``synchronous=normal``): backend ``disk`` is a
folder on local disk (the system's temporary folder, or ``--folder``), ``tmpfs`` one in
``/dev/shm``.

Histories of 10 and 1,000 messages. Every round runs one operation of every variant in a
shuffled order, so a noisy machine slows all of them alike (``chatkeep_bench.interleaved``
runs the command line and prints the table): medians and p99s per variant, each chatkeep
variant's ratio to its peer (below 1.0: chatkeep is faster), and each target of issue 26
met or not (at least as fast as the peer, turn and edit / restore, at every length; for
Strands the default ``synchronous=full`` row is the one judged).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from random import Random
from typing import Any

from .interleaved import Target, ratio_table, run, summary, target_lines

POSTGRES = (
    os.environ.get("CHATKEEP_TEST_POSTGRES_URL") or "postgresql://postgres@127.0.0.1:5432/test"
)
REDIS = os.environ.get("CHATKEEP_TEST_REDIS_URL") or "redis://127.0.0.1:6379/0"
TEXT = "x" * 150  # ~300 bytes a message once stored, like the main benchmark's
LLAMA_BACKENDS = ["sqlite", "redis", "postgres"]
STRANDS_BACKENDS = ["disk", "tmpfs"]


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
            for operation, call in variant.operations.items():
                start = time.perf_counter()
                call()
                variant.times.setdefault(operation, []).append(time.perf_counter() - start)


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
        variants.append(Variant("chatkeep", None, operations))
    if "redis" in backends:
        from llama_index.storage.chat_store.redis import RedisChatStore

        store = cleanup.enter_context(open_store(REDIS, namespace=f"ckbench-{token}"))
        operations = _llama_operations(ChatkeepChatStore(store=store), key, length)
        variants.append(Variant("chatkeep", "RedisChatStore", operations))
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
        variants.append(Variant("chatkeep", "PostgresChatStore", operations))
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

    def chat() -> None:
        # A turn whose agent state did not change: RepositorySessionManager.sync_agent
        # skips update_agent then, so the turn is the two messages alone.
        for role in ("user", "assistant"):
            message = {"role": role, "content": [{"text": TEXT}]}
            repository.create_message(
                session_id, "a", SessionMessage(message=message, message_id=next_id[0])
            )
            next_id[0] += 1

    def restore() -> None:
        from strands import Agent

        manager = RepositorySessionManager(session_id=session_id, session_repository=make())
        manager.initialize(Agent(agent_id="a", callback_handler=None))

    return {"turn": turn, "chat": chat, "restore": restore}


def _strands_variants(
    length: int, token: str, workdir: Path, cleanup: contextlib.ExitStack
) -> list[Variant]:
    from strands.session.file_session_manager import FileSessionManager

    from chatkeep.core import open_store
    from chatkeep.strands import ChatkeepSessionRepository

    FileSessionManager._bench_init = _file_repository  # type: ignore[attr-defined]
    session_id = f"ckbench-{token}-{length}"
    files = workdir / f"files-{length}"
    variants = [
        Variant(
            "FileSessionManager",
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
        store = cleanup.enter_context(open_store(url))
        variants.append(
            Variant(
                f"chatkeep (synchronous={synchronous})",
                "FileSessionManager",
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


def _rows(backend: str, length: int, variants: list[Variant]) -> list[dict[str, Any]]:
    return [
        {
            "backend": backend,
            "store": variant.name,
            "length": length,
            **{op: summary([t * 1000 for t in times]) for op, times in variant.times.items()},
        }
        for variant in variants
    ]


def _measure_llama(
    backend: str, lengths: list[int], rounds: int, seed: int, folder: Path
) -> list[dict[str, Any]]:
    token = secrets.token_hex(4)
    rows: list[dict[str, Any]] = []
    for length in lengths:
        with contextlib.ExitStack() as cleanup:
            variants = _llama_variants([backend], length, token, cleanup, folder)
            _measure(variants, rounds, seed)
            rows += _rows(backend, length, variants)
        print(f"[{backend}] {length} messages: done", flush=True)
    return rows


def _measure_strands(
    backend: str, lengths: list[int], rounds: int, seed: int, folder: Path
) -> list[dict[str, Any]]:
    token = secrets.token_hex(4)
    rows: list[dict[str, Any]] = []
    with contextlib.ExitStack() as outer:
        if backend == "tmpfs":
            folder = Path(outer.enter_context(tempfile.TemporaryDirectory(dir="/dev/shm")))
        for length in lengths:
            with contextlib.ExitStack() as cleanup:
                variants = _strands_variants(length, token, folder, cleanup)
                _measure(variants, rounds, seed)
                rows += _rows(backend, length, variants)
            print(f"[{backend}] {length} messages: done", flush=True)
    return rows


def _llama_table(rows: list[dict[str, Any]]) -> Iterator[str]:
    columns = [("turn", "turn ms, median (p99)"), ("edit", "edit ms, median (p99)")]
    return ratio_table(rows, "store", "messages", columns)


def _strands_table(rows: list[dict[str, Any]]) -> Iterator[str]:
    columns = [
        ("turn", "turn ms, median (p99)"),
        ("chat", "chat turn ms, median (p99)"),
        ("restore", "restore ms, median (p99)"),
    ]
    return ratio_table(rows, "store", "messages", columns)


#: Issue 26: each adapter at least as fast as the framework's own persistent store.
LLAMA_TARGETS = [
    Target("chatkeep", peer, column, 1.0, backend)
    for backend, peer in (("redis", "RedisChatStore"), ("postgres", "PostgresChatStore"))
    for column in ("turn", "edit")
]
STRANDS_TARGETS = [
    Target("chatkeep (synchronous=full)", "FileSessionManager", column, 1.0)
    for column in ("turn", "restore")
]


def main(argv: list[str], which: str) -> int:
    """``run.py llama-index ...`` or ``run.py strands ...``; 0 unless nothing was measured."""
    import warnings

    warnings.filterwarnings("ignore")
    if which == "llama-index":
        description = "LlamaIndex chat stores: chatkeep vs RedisChatStore / PostgresChatStore"
        backends, measure, table = LLAMA_BACKENDS, _measure_llama, _llama_table
        targets = LLAMA_TARGETS
    else:
        description = "Strands sessions: chatkeep on SQLite vs FileSessionManager"
        backends, measure, table = STRANDS_BACKENDS, _measure_strands, _strands_table
        targets = STRANDS_TARGETS
    return run(
        argv,
        description=description,
        backends=backends,
        measure=measure,
        table=table,
        rounds=200,
        quick_rounds=40,
        default_lengths="10,1000",
        targets=lambda rows: target_lines(rows, "store", targets),
    )
