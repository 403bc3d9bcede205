"""Time to first byte of ``chatkeep serve``'s pages: flat in the store's size and in the
conversation's length (issue 28).

    python benchmarks/web_pages.py [--sessions 100000] [--rounds 40] [--backends sqlite,redis]

For each backend, two stores: a small one (100 sessions) and a large one (``--sessions``
sessions, two messages each); the large one also holds a 10-message and a 10,000-message
session. Each store is served by its own ``chatkeep serve`` process (the real command,
uvicorn, read-only handle). Each round then asks, interleaved, each request on a connection
of its own opened before the clock starts: the sessions page of the small and of the large
store, and the conversation page of the 10-, the 50- and the 10,000-message session (50:
one page's worth). Time to first byte = from sending the request to having the status line
and headers (``http.client``'s ``getresponse``); the body is read
after the clock stops. Medians and 90th percentiles over the rounds; ratios large/small
and 10,000/10.

SQLite stores live on ``/dev/shm`` when it exists (filling 100,000 sessions on a disk with
``synchronous=FULL`` takes many minutes; what is read is the same). Redis uses the local
server (``CHATKEEP_TEST_REDIS_URL``, else ``redis://127.0.0.1:6379/0``) under a namespace of
its own, erased afterwards.
"""

from __future__ import annotations

import argparse
import http.client
import os
import secrets
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from urllib.parse import quote

from chatkeep.core import Message, Store, TextContent, encode_records, open_store
from chatkeep.core.ids import new_id
from chatkeep.core.metadata import RunningCount, utc_stamp

#: The conversations measured: id -> messages.
LONG = {"ten": 10, "fifty": 50, "long": 10_000}
REDIS_URL = os.environ.get("CHATKEEP_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")


def _messages(count: int, label: str) -> list[Message]:
    return [
        Message(
            "user" if n % 2 == 0 else "assistant",
            [TextContent(f"{label} message {n}: " + "lorem ipsum " * 8)],
            message_id=new_id(),
        )
        for n in range(count)
    ]


def _write(store: Store, session_id: str, messages: list[Message], batch: int) -> None:
    """``messages`` in batches of ``batch``, each carrying the running count, as
    ``HistoryProvider`` and the framework adapters write them."""
    count = RunningCount(0, None)
    for start in range(0, len(messages), batch):
        marked = count.mark(messages[start : start + batch])
        records = encode_records(marked, stored_at=utc_stamp())
        store.append(session_id, records)
        count = count.extended(records)


def fill(url: str, sessions: int, *, long_sessions: bool) -> None:
    """``sessions`` two-message sessions; with ``long_sessions``, also sessions of 10, 100
    and 10,000 messages, the most recently updated."""
    store = open_store(url)
    try:
        for n in range(sessions):
            _write(store, f"s{n:07d}", _messages(2, "short"), 2)
            if n and n % 20_000 == 0:
                print(f"  {url.split(':', 1)[0]}: {n} sessions", file=sys.stderr, flush=True)
        if long_sessions:
            for name, length in LONG.items():
                _write(store, name, _messages(length, name), 1000)
    finally:
        store.close()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextmanager
def served(url: str) -> Iterator[int]:
    """``chatkeep serve --url url`` on a spare port, until the block ends."""
    port = _free_port()
    command = [sys.executable, "-m", "chatkeep.cli", "serve", "--url", url, "--port", str(port)]
    process = subprocess.Popen(command, stderr=subprocess.DEVNULL)
    try:
        for _ in range(600):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if process.poll() is not None:
                    raise RuntimeError(f"chatkeep serve exited with {process.returncode}") from None
                time.sleep(0.05)
        yield port
    finally:
        process.terminate()
        process.wait(timeout=30)


def ttfb(port: int, path: str) -> float:
    """Seconds from sending ``GET path`` (on a new connection, already open) to having its
    status line and headers."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    connection.connect()
    started = time.perf_counter()
    connection.request("GET", path)
    response = connection.getresponse()
    elapsed = time.perf_counter() - started
    body = response.read()
    connection.close()
    if response.status != 200 or not body:
        raise RuntimeError(f"GET {path}: {response.status}")
    return elapsed


def first_views(url: str, rounds: int) -> dict[str, list[float]]:
    """The page's reads for a session the app has not shown before (no
    :class:`~chatkeep.web.conversation.Known`: the O(log n) length probe and the head
    read), in process, interleaved: the data behind a first view, without HTTP or HTML."""
    import asyncio

    from chatkeep.cli.stores import StoreChoice, open_store_for
    from chatkeep.web.conversation import log_page

    store = open_store_for(StoreChoice(url, "--url"), read_only=True)
    samples: dict[str, list[float]] = {
        f"first view's reads, {length:,} messages": [] for length in LONG.values()
    }

    async def measure() -> None:
        for _ in range(rounds):
            for (name, _length), key in zip(LONG.items(), samples, strict=True):
                started = time.perf_counter()
                await log_page(store, name)
                samples[key].append(time.perf_counter() - started)

    try:
        asyncio.run(measure())
    finally:
        store.close()
    return samples


def _summary(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered), ordered[int(0.9 * (len(ordered) - 1))]


def run_backend(backend: str, sessions: int, rounds: int, workdir: Path) -> list[str]:
    token = secrets.token_hex(4)
    if backend == "sqlite":
        small, large = (f"sqlite:///{workdir / f'{name}-{token}.db'}" for name in ("s", "l"))
    else:
        join = "&" if "?" in REDIS_URL else "?"
        small, large = (f"{REDIS_URL}{join}namespace=webbench-{token}-{n}" for n in ("s", "l"))
    print(f"{backend}: filling {sessions} sessions ...", file=sys.stderr, flush=True)
    started = time.perf_counter()
    fill(small, 100, long_sessions=False)
    fill(large, sessions, long_sessions=True)
    print(f"  filled in {time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
    try:
        with served(small) as small_port, served(large) as large_port:
            small_http, large_http = small_port, large_port
            cases = {
                "sessions page, 100 sessions": (small_http, "/"),
                f"sessions page, {sessions:,} sessions": (large_http, "/"),
                **{
                    f"conversation, {length:,} messages": (large_http, f"/session?id={quote(name)}")
                    for name, length in LONG.items()
                },
            }
            for connection, path in cases.values():  # warm: imports, templates, caches
                ttfb(connection, path)
            samples: dict[str, list[float]] = {name: [] for name in cases}
            for _ in range(rounds):
                for name, (connection, path) in cases.items():
                    samples[name].append(ttfb(connection, path))
        first = first_views(large, rounds)
    finally:
        if backend == "redis":
            import redis

            client = redis.Redis.from_url(REDIS_URL)
            for key in client.scan_iter(match=f"*webbench-{token}-*", count=5000):
                client.unlink(key)
            client.close()
    rows = []
    medians = {}
    for name, values in samples.items():
        median, p90 = _summary(values)
        medians[name] = median
        rows.append(f"| {backend} | {name} | {median * 1e3:.1f} ms | {p90 * 1e3:.1f} ms |")
    names = list(medians)
    ratios = {
        "sessions page, large/small store": medians[names[1]] / medians[names[0]],
        "conversation, 10,000/50 messages": medians[names[4]] / medians[names[3]],
        "conversation, 10,000/10 messages": medians[names[4]] / medians[names[2]],
    }
    rows += [f"| {backend} | ratio {name} | {ratio:.2f}x | |" for name, ratio in ratios.items()]
    for name, values in first.items():
        median, p90 = _summary(values)
        rows.append(f"| {backend} | {name} | {median * 1e3:.2f} ms | {p90 * 1e3:.2f} ms |")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--backends", default="sqlite,redis")
    args = parser.parse_args()
    shm = Path("/dev/shm")
    with ExitStack() as stack:
        base = shm if shm.is_dir() else None
        workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(dir=base)))
        print("| backend | page | TTFB median | TTFB p90 |\n|---|---|---|---|", flush=True)
        for backend in args.backends.split(","):
            rows = run_backend(backend.strip(), args.sessions, args.rounds, workdir)
            print("\n".join(rows), flush=True)


if __name__ == "__main__":
    main()
