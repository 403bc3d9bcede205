"""LangGraph checkpointers: chatkeep's ``ChatkeepSaver`` against LangGraph's own savers on
the same backend, side by side in one interleaved run.

    python benchmarks/run.py langgraph [--quick] [--backends memory,sqlite,postgres,redis]
                                       [--lengths 10,100,1000] [--rounds 200] [--json f]

Per backend and thread length (checkpoints already in the thread), each saver answers, in
a shuffled order every round: **load latest** (``get_tuple`` of the thread, the call every
``graph.invoke`` starts with) and **put** (one checkpoint continuing the thread plus one
``put_writes``, what every super-step ends with). A checkpoint looks like a chat agent's:
a ``messages`` channel (the newest 40 messages, ~14 KB), two small trigger channels, and a
6 KB ``context`` channel that never changes after the first step (so a saver that re-stored
unchanged values would show it).

Peers: ``InMemorySaver`` (memory), ``SqliteSaver`` (langgraph-checkpoint-sqlite, on its own
file in the same folder), ``PostgresSaver`` (langgraph-checkpoint-postgres, in its own
schema on the same server). Redis has no row for a peer: LangGraph's Redis saver needs the
RedisJSON and RediSearch modules, which a plain Redis lacks.
"""

from __future__ import annotations

import os
import secrets
import sqlite3
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from random import Random
from typing import Any

from .interleaved import ratio_table, run, summary

POSTGRES = (
    os.environ.get("CHATKEEP_TEST_POSTGRES_URL") or "postgresql://postgres@127.0.0.1:5432/test"
)
REDIS = os.environ.get("CHATKEEP_TEST_REDIS_URL") or "redis://127.0.0.1:6379/0"
BACKENDS = ["memory", "sqlite", "postgres", "redis"]
WINDOW = 40  # messages kept in the ``messages`` channel


@dataclass
class Thread:
    """One saver's thread, continued step by step."""

    name: str
    saver: Any
    thread_id: str = field(default_factory=lambda: f"bench-{uuid.uuid4().hex[:10]}")
    config: dict[str, Any] = field(default_factory=dict)
    versions: dict[str, Any] = field(default_factory=dict)
    step: int = 0

    def __post_init__(self) -> None:
        self.config = {"configurable": {"thread_id": self.thread_id, "checkpoint_ns": ""}}

    def put(self, messages: list[Any], context: str) -> None:
        from langgraph.checkpoint.base import empty_checkpoint

        checkpoint = empty_checkpoint()
        changed = ["messages", "branch:to:agent", "__start__"]
        if self.step == 0:
            changed.append("context")
        for channel in changed:
            self.versions[channel] = self.saver.get_next_version(self.versions.get(channel), None)
        checkpoint["channel_versions"] = dict(self.versions)
        checkpoint["channel_values"] = {
            "messages": messages,
            "branch:to:agent": None,
            "__start__": {"messages": messages[-1:]},
            "context": context,
        }
        checkpoint["versions_seen"] = {
            "agent": {"branch:to:agent": self.versions["branch:to:agent"]}
        }
        metadata = {"source": "loop", "step": self.step, "parents": {}}
        new = {channel: self.versions[channel] for channel in changed}
        self.config = self.saver.put(self.config, checkpoint, metadata, new)
        self.saver.put_writes(self.config, [("messages", messages[-1:])], f"task-{self.step}")
        self.step += 1

    def load(self) -> Any:
        found = self.saver.get_tuple({"configurable": {"thread_id": self.thread_id}})
        assert (
            found is not None
            and found.checkpoint["id"] == self.config["configurable"]["checkpoint_id"]
        )
        return found


def _messages(step: int) -> list[Any]:
    from langchain_core.messages import AIMessage, HumanMessage

    out: list[Any] = []
    for index in range(max(0, step - WINDOW + 1), step + 1):
        cls = HumanMessage if index % 2 == 0 else AIMessage
        out.append(
            cls(content=f"message {index}: " + "lorem ipsum dolor sit amet " * 12, id=f"m{index}")
        )
    return out


CONTEXT = "You are a helpful assistant. " * 200


# -- the savers of each backend ----------------------------------------------------------


def _savers(backend: str, stack: ExitStack, token: str, workdir: Path) -> list[tuple[str, Any]]:
    from chatkeep.langgraph import ChatkeepSaver

    savers: list[tuple[str, Any]] = []
    if backend == "memory":
        from langgraph.checkpoint.memory import InMemorySaver

        savers.append(("chatkeep", stack.enter_context(ChatkeepSaver(url="memory://"))))
        savers.append(("InMemorySaver", InMemorySaver()))
    elif backend == "sqlite":
        # chatkeep's SQLite default is WAL + synchronous=full (an acknowledged append
        # survives power loss); SqliteSaver commits with SQLite's defaults (rollback
        # journal, synchronous=full). chatkeep's faster opt-in setting is measured too.
        for name, query in (
            ("chatkeep", ""),
            ("chatkeep synchronous=normal", "?synchronous=normal"),
        ):
            url = f"sqlite:///{workdir / (name.replace(' ', '-') + '.db')}{query}"
            savers.append((name, stack.enter_context(ChatkeepSaver(url=url))))
        try:
            from langgraph.checkpoint.sqlite import SqliteSaver
        except ImportError:
            print("  SqliteSaver: not installed (pip install langgraph-checkpoint-sqlite)")
        else:
            conn = sqlite3.connect(workdir / "langgraph.db", check_same_thread=False)
            stack.callback(conn.close)
            savers.append(("SqliteSaver", SqliteSaver(conn)))
    elif backend == "postgres":
        import psycopg

        with psycopg.connect(POSTGRES, connect_timeout=3):
            pass
        ours, theirs = f"ck_lgbench_{token}", f"lg_lgbench_{token}"

        def drop() -> None:
            with psycopg.connect(POSTGRES, autocommit=True) as conn:
                for schema in (ours, theirs):
                    conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')

        stack.callback(drop)
        separator = "&" if "?" in POSTGRES else "?"
        savers.append(
            (
                "chatkeep",
                stack.enter_context(ChatkeepSaver(url=f"{POSTGRES}{separator}schema={ours}")),
            )
        )
        try:
            from langgraph.checkpoint.postgres import PostgresSaver
        except ImportError:
            print("  PostgresSaver: not installed (pip install langgraph-checkpoint-postgres)")
        else:
            with psycopg.connect(POSTGRES, autocommit=True) as conn:
                conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{theirs}"')
            conninfo = f"{POSTGRES}{separator}options=-csearch_path%3D{theirs}"
            saver = stack.enter_context(PostgresSaver.from_conn_string(conninfo))
            saver.setup()
            savers.append(("PostgresSaver", saver))
    elif backend == "redis":
        import redis

        redis.Redis.from_url(REDIS, socket_connect_timeout=2).ping()
        namespace = f"ckbench-{token}:"

        def erase() -> None:
            client = redis.Redis.from_url(REDIS)
            for key in client.scan_iter(match=f"{namespace}*", count=1000):
                client.unlink(key)
            client.close()

        stack.callback(erase)
        separator = "&" if "?" in REDIS else "?"
        url = f"{REDIS}{separator}namespace={namespace}"
        savers.append(("chatkeep", stack.enter_context(ChatkeepSaver(url=url))))
    return savers


# -- measuring ---------------------------------------------------------------------------


def _timed(action: Callable[[], Any]) -> float:
    started = time.perf_counter()
    action()
    return (time.perf_counter() - started) * 1000


def measure(
    backend: str, lengths: list[int], rounds: int, seed: int, workdir: Path
) -> list[dict[str, Any]]:
    """Rows ``{backend, saver, length, load, put}`` for one backend."""
    token = secrets.token_hex(4)
    rows: list[dict[str, Any]] = []
    random = Random(seed)
    with ExitStack() as stack:
        savers = _savers(backend, stack, token, workdir)
        for length in lengths:
            threads = [Thread(name, saver) for name, saver in savers]
            for step in range(length):  # fill, interleaved too
                messages = _messages(step)
                for thread in threads:
                    thread.put(messages, CONTEXT)
            loads: dict[str, list[float]] = {t.name: [] for t in threads}
            puts: dict[str, list[float]] = {t.name: [] for t in threads}
            for _round in range(rounds):
                order = list(threads)
                random.shuffle(order)
                messages = _messages(order[0].step)
                for thread in order:
                    loads[thread.name].append(_timed(thread.load))
                    puts[thread.name].append(_timed(lambda t=thread, m=messages: t.put(m, CONTEXT)))
            for thread in threads:
                rows.append(
                    {
                        "backend": backend,
                        "saver": thread.name,
                        "length": length,
                        "load": summary(loads[thread.name]),
                        "put": summary(puts[thread.name]),
                    }
                )
            print(f"[{backend}] {length} checkpoints: done", flush=True)
    return rows


def table(rows: list[dict[str, Any]]) -> Iterator[str]:
    """Markdown: per backend and length, each saver's medians (p99) and chatkeep's ratio."""
    return ratio_table(
        rows,
        "saver",
        "checkpoints",
        [("load", "load latest ms, median (p99)"), ("put", "put + put_writes ms, median (p99)")],
    )


def main(argv: list[str] | None = None) -> int:
    """Run the LangGraph checkpointer benchmark; 0 unless nothing could be measured."""
    return run(
        argv,
        description=(__doc__ or "").split("\n\n")[0],
        backends=BACKENDS,
        measure=measure,
        table=table,
        rounds=200,
        quick_rounds=50,
    )
