"""Helpers for the PostgreSQL tests: URL building and code run in spawned processes.

A plain module (not conftest) so that tests and spawned children can import it by name;
``conftest.py`` puts this folder on ``sys.path``, which spawned children inherit.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable
from multiprocessing.synchronize import Event
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from chatkeep.core import Record

DEFAULT_URL = "postgresql://postgres@127.0.0.1:5432/test"


def base_url() -> str:
    """The server the tests use: ``CHATKEEP_TEST_POSTGRES_URL``, else the local default."""
    return os.environ.get("CHATKEEP_TEST_POSTGRES_URL") or DEFAULT_URL


def with_query(url: str, **params: object) -> str:
    """``url`` with ``params`` added to (or replacing those in) its query string."""
    parts = urlsplit(url)
    query = dict(parse_qsl(parts.query, keep_blank_values=True))
    query.update({key: str(value) for key, value in params.items()})
    return urlunsplit(parts._replace(query=urlencode(query)))


def _report(queue: multiprocessing.Queue[Any], start: Event, work: Callable[[], Any]) -> None:
    queue.put(("ready", None))
    start.wait(60)  # all children start their work at the same moment
    try:
        queue.put(("done", work()))
    except BaseException as exc:  # reported to the parent, which fails the test
        queue.put(("error", f"{type(exc).__name__}: {exc}"))


def migrate_then_append(
    queue: multiprocessing.Queue[Any], start: Event, url: str, index: int
) -> None:
    """Open a store on a fresh schema, migrate, append one batch; report migrations applied."""
    from chatkeep.postgres import PostgresStore

    def work() -> int:
        store = PostgresStore(url)
        try:
            applied = store.migrate()
            store.append("shared", [Record(f"p{index}-{n}", b"x%d" % n) for n in range(3)])
            return applied
        finally:
            store.close()

    _report(queue, start, work)


def first_use_appends(
    queue: multiprocessing.Queue[Any], start: Event, url: str, index: int
) -> None:
    """Open a store on a fresh schema and append straight away (migration on first use)."""
    from chatkeep.postgres import PostgresStore

    def work() -> None:
        store = PostgresStore(url)
        try:
            store.append("shared", [Record(f"q{index}", b"q")])
        finally:
            store.close()

    _report(queue, start, work)


def append_batches(
    queue: multiprocessing.Queue[Any],
    start: Event,
    url: str,
    index: int,
    session_id: str,
    batches: int,
) -> None:
    """Append ``batches`` two-record batches to one session."""
    from chatkeep.postgres import PostgresStore

    def work() -> None:
        store = PostgresStore(url)
        try:
            for batch in range(batches):
                store.append(
                    session_id,
                    [
                        Record(f"w{index}-b{batch}-0", b"%d,%d,0" % (index, batch)),
                        Record(f"w{index}-b{batch}-1", b"%d,%d,1" % (index, batch)),
                    ],
                )
        finally:
            store.close()

    _report(queue, start, work)


def run_in_processes(target: Callable[..., None], args: list[tuple[Any, ...]]) -> list[Any]:
    """Run ``target(queue, start, *args[i])`` in one spawned process per entry, released at
    once when all are ready; return their results, raising if any child failed."""
    context = multiprocessing.get_context("spawn")
    queue: multiprocessing.Queue[Any] = context.Queue()
    start = context.Event()
    processes = [
        context.Process(target=target, args=(queue, start, *extra), daemon=True) for extra in args
    ]
    for process in processes:
        process.start()
    try:
        for _ in processes:
            kind, _value = queue.get(timeout=120)
            assert kind == "ready"
        start.set()
        outcomes = [queue.get(timeout=120) for _ in processes]
    finally:
        for process in processes:
            process.join(timeout=30)
    errors = [value for kind, value in outcomes if kind == "error"]
    assert not errors, errors
    return [value for _kind, value in outcomes]
