"""Scale benchmark (issue 15): does every cost promise hold as a session grows and a store
fills up, from a cold start?

For each backend it grows one session (1k -> 1M records; S3 and Azure by number of appends,
which is what their layouts pay for) and fills a store with sessions (1k -> 1M), and at each
size counts the round trips (server backends: a counting TCP proxy; S3 and Azure: HTTP
requests through a counting proxy; SQLite: statements) and the time of

- a cold ``read(-50)`` and a cold ``append`` (a fresh process: nothing cached),
- a warm ``read(-50)``, ``append`` and ``read_view(limit=50)`` (the same handle again),
- ``list_sessions(prefix)`` matching 1% of the sessions, and the peak memory of listing all,

then prints the growth ratio from the smallest to the largest size (a kept promise is ~1x).

    python benchmarks/scale.py [--quick] [--backends sqlite,redis,postgres,s3,azure_blob]
                               [--s3-options 'k=v&...'] [--azure-options 'k=v&...']
                               [--json results.json] [--markdown results.md]

or ``nox -s scale -- --quick`` (under 5 minutes). Not part of CI: the full run takes long.
Everything is written under throwaway names and removed at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

sys.path.insert(0, str(Path(__file__).resolve().parent))

from chatkeep_bench.roundtrips import HTTPCounter, TCPCounter, count_sqlite_statements

from chatkeep.core import Message, Record, encode_records, new_id, open_store, read_view

COLD = r"""
import json, sys, time
url, session, operation, sqlite = sys.argv[1:5]
if sqlite == "1":
    sys.path.insert(0, sys.argv[5])
    from chatkeep_bench.roundtrips import count_sqlite_statements
    counter = count_sqlite_statements()
from chatkeep.core import new_id, open_store, read_view
store = open_store(url)
store.read("ckscale-warm-up-" + new_id(), -1)  # connect first: the op alone is measured
print("ready", flush=True)
sys.stdin.readline()
before = counter.count if sqlite == "1" else 0
start = time.perf_counter()
if operation == "read":
    store.read(session, -50)
elif operation == "append":
    from chatkeep.core import Message, encode_records
    store.append(session, encode_records([Message.user("x" * 250, message_id=new_id())]))
else:
    read_view(store, session, limit=50)
seconds = time.perf_counter() - start
statements = (counter.count - before) if sqlite == "1" else 0
print(json.dumps({"seconds": seconds, "statements": statements}), flush=True)
store.close()
"""


@dataclass
class Cost:
    """What one operation cost: round trips (or statements) and seconds."""

    trips: int
    seconds: float


@dataclass
class Target:
    """A backend under measurement: its URL and how to count its round trips."""

    name: str
    url: str
    count: Callable[[], int]
    unit: str
    sqlite: bool = False
    by_appends: bool = False  # grow by number of appends (S3, Azure), not by records


@dataclass
class Result:
    backend: str
    unit: str
    session_rows: list[dict[str, object]] = field(default_factory=list)
    listing_rows: list[dict[str, object]] = field(default_factory=list)


def with_query(url: str, **params: str) -> str:
    parts = urlsplit(url)
    query = dict(parse_qsl(parts.query, keep_blank_values=True))
    query.update(params)
    return urlunsplit(parts._replace(query=urlencode(query)))


def options(text: str) -> dict[str, str]:
    return dict(parse_qsl(text, keep_blank_values=True)) if text else {}


# -- backends -----------------------------------------------------------------------------


@contextmanager
def target(
    name: str, stack: ExitStack, workdir: Path, args: argparse.Namespace
) -> Iterator[Target]:
    token = secrets.token_hex(4)
    if name == "sqlite":
        counter = count_sqlite_statements()
        yield Target(
            name,
            # Counts do not depend on the sync mode; normal keeps filling a million sessions
            # from 8 threads to minutes (with full, each of them is an fsync).
            f"sqlite:///{workdir / f'scale-{token}.db'}?synchronous=normal&timeout=120",
            lambda: counter.count,
            "statements",
            sqlite=True,
        )
        return
    if name == "redis":
        import redis

        server = os.environ.get("CHATKEEP_TEST_REDIS_URL") or "redis://127.0.0.1:6379/0"
        parts = urlsplit(server)
        proxy = TCPCounter((parts.hostname or "127.0.0.1", parts.port or 6379))
        stack.callback(proxy.close)
        prefix = f"ckscale-{token}:"
        client = redis.Redis.from_url(server)

        def erase() -> None:
            for key in client.scan_iter(match=prefix + "*", count=5000):
                client.unlink(key)

        stack.callback(erase)
        url = parts._replace(netloc=f"127.0.0.1:{proxy.port}").geturl()
        yield Target(name, with_query(url, key_prefix=prefix), lambda: proxy.count, "round trips")
        return
    if name == "postgres":
        import psycopg

        server = (
            os.environ.get("CHATKEEP_TEST_POSTGRES_URL")
            or "postgresql://postgres@127.0.0.1:5432/test"
        )
        parts = urlsplit(server)
        proxy = TCPCounter((parts.hostname or "127.0.0.1", parts.port or 5432))
        stack.callback(proxy.close)
        schema = f"ck_scale_{token}"

        def drop() -> None:
            with psycopg.connect(server, autocommit=True) as connection:
                connection.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')

        stack.callback(drop)
        netloc = parts.netloc.rsplit("@", 1)
        host = (
            f"{netloc[0]}@127.0.0.1:{proxy.port}" if len(netloc) == 2 else f"127.0.0.1:{proxy.port}"
        )
        url = parts._replace(netloc=host).geturl()
        yield Target(name, with_query(url, schema=schema), lambda: proxy.count, "round trips")
        return
    if name == "s3":
        from contextlib import ExitStack as Cleanup

        from chatkeep.testing.servers import s3_store_url

        inner = stack.enter_context(Cleanup())
        url = s3_store_url(inner)
        endpoint = dict(parse_qsl(urlsplit(url).query))["endpoint_url"]
        proxy = HTTPCounter(endpoint)
        stack.callback(proxy.close)
        url = with_query(url, endpoint_url=proxy.url, **options(args.s3_options))
        yield Target(name, url, lambda: proxy.count, "requests", by_appends=True)
        return
    if name == "azure_blob":
        from chatkeep.testing.servers import azure_store_url

        url = azure_store_url(stack, workdir / "azurite", Path(__file__).resolve().parents[1])
        query = dict(parse_qsl(urlsplit(url).query))
        connection = query["connection_string"]
        endpoint = dict(p.split("=", 1) for p in connection.split(";") if "=" in p)["BlobEndpoint"]
        upstream = endpoint.rsplit("/", 1)[0]
        proxy = HTTPCounter(upstream)
        stack.callback(proxy.close)
        url = with_query(
            url,
            connection_string=connection.replace(upstream, proxy.url),
            **options(args.azure_options),
        )
        yield Target(name, url, lambda: proxy.count, "requests", by_appends=True)
        return
    raise SystemExit(f"unknown backend {name!r}")


# -- measuring ------------------------------------------------------------------------------


def cold(t: Target, session: str, operation: str) -> Cost:
    """The operation in a fresh process (connected first, then measured alone)."""
    command = [
        sys.executable,
        "-c",
        COLD,
        t.url,
        session,
        operation,
        "1" if t.sqlite else "0",
        str(Path(__file__).resolve().parent),
    ]
    process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None and process.stdin is not None
    line = process.stdout.readline()
    if line.strip() != "ready":
        process.kill()
        raise RuntimeError(f"the cold {operation} process failed to start ({line!r})")
    before = t.count()
    process.stdin.write("go\n")
    process.stdin.flush()
    figures = json.loads(process.stdout.readline())
    process.wait(120)
    trips = figures["statements"] if t.sqlite else t.count() - before
    return Cost(int(trips), float(figures["seconds"]))


def warm(t: Target, operation: Callable[[], object]) -> Cost:
    before = t.count()
    start = time.perf_counter()
    operation()
    return Cost(t.count() - before, time.perf_counter() - start)


def messages(count: int) -> list[Record]:
    """``count`` user messages of about 300 bytes, encoded as chatkeep stores them."""
    return encode_records([Message.user("y" * 250, message_id=new_id()) for _ in range(count)])


def grow(store: object, session: str, current: int, size: int, by_appends: bool) -> None:
    """Bring the session from ``current`` to ``size`` records (one per append for the
    object stores, whose cost grows with appends; 1,000 per append otherwise)."""
    per_append = 1 if by_appends else 1000
    while current < size:
        count = min(per_append, size - current)
        store.append(session, messages(count))  # type: ignore[attr-defined]
        current += count


def fill(store: object, count: int, current: int, matching_every: int = 100) -> None:
    """Create sessions up to ``count`` (1 in ``matching_every`` named ``match-...``)."""
    from concurrent.futures import ThreadPoolExecutor

    def make(number: int) -> None:
        name = f"match-{number:08d}" if number % matching_every == 0 else f"other-{number:08d}"
        store.append(name, [Record("m", b"z" * 100)])  # type: ignore[attr-defined]

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(make, range(current, count)))


def _drain(store: object, prefix: str) -> list[str]:
    return list(store.list_sessions(prefix))  # type: ignore[attr-defined]


def measure(t: Target, record_sizes: list[int], session_counts: list[int]) -> Result:
    result = Result(t.name, t.unit)
    store = open_store(t.url)
    try:
        session = f"scale-{secrets.token_hex(4)}"
        current = 0
        for size in record_sizes:
            grow(store, session, current, size, t.by_appends)
            current = size
            row: dict[str, object] = {"size": size}
            for label, op in (("cold read(-50)", "read"), ("cold append", "append")):
                row[label] = cold(t, session, op)
            handle = open_store(t.url)
            handle.read(session, -50)  # now warm
            row["warm read(-50)"] = warm(t, partial(handle.read, session, -50))
            row["warm append"] = warm(t, partial(handle.append, session, messages(1)))
            row["view(limit=50)"] = warm(t, partial(read_view, handle, session, limit=50))
            handle.close()
            result.session_rows.append(row)
            print(
                f"  {t.name} {size:>9,} {'appends' if t.by_appends else 'records'}: "
                + ", ".join(f"{k} {v.trips}" for k, v in row.items() if isinstance(v, Cost)),
                flush=True,
            )
        made = 0
        lister = open_store(t.url)
        for count in session_counts:
            fill(store, count, made)
            made = count
            _drain(lister, "match-")  # a first listing may do one-time work (Redis's 0.1 check)
            prefix_cost = warm(t, partial(_drain, lister, "match-"))
            tracemalloc.start()
            start = time.perf_counter()
            before = t.count()
            total = sum(1 for _ in lister.list_sessions())
            seconds = time.perf_counter() - start
            _, peak = tracemalloc.get_traced_memory()
            tracemalloc.stop()
            result.listing_rows.append(
                {
                    "sessions": count,
                    "prefix (1%)": prefix_cost,
                    "all": Cost(t.count() - before, seconds),
                    "listed": total,
                    "peak KiB": peak // 1024,
                }
            )
            print(
                f"  {t.name} {count:>9,} sessions: prefix {prefix_cost.trips} {t.unit}, "
                f"all {t.count() - before}, peak {peak // 1024} KiB",
                flush=True,
            )
        lister.close()
    finally:
        store.close()
    return result


# -- reporting --------------------------------------------------------------------------------


def growth(rows: list[dict[str, object]], key: str, attribute: str) -> str:
    first, last = rows[0][key], rows[-1][key]
    a, b = getattr(first, attribute), getattr(last, attribute)
    if a == 0:
        return "n/a" if b == 0 else f"0 -> {b}"
    return f"{b / a:.2f}x"


def markdown(results: list[Result]) -> str:
    lines = []
    for result in results:
        rows = result.session_rows
        keys = [k for k in rows[0] if k != "size"] if rows else []
        lines.append(f"### {result.backend} ({result.unit}; seconds in brackets)\n")
        lines.append("| size | " + " | ".join(keys) + " |")
        lines.append("|---|" + "---|" * len(keys))
        for row in rows:
            cells = [f"{row[k].trips} ({row[k].seconds * 1000:.1f} ms)" for k in keys]  # type: ignore[attr-defined]
            lines.append(f"| {row['size']:,} | " + " | ".join(cells) + " |")
        if rows:
            lines.append(
                "| growth | "
                + " | ".join(
                    f"{growth(rows, k, 'trips')} ({growth(rows, k, 'seconds')})" for k in keys
                )
                + " |"
            )
        listing = result.listing_rows
        if listing:
            lines.append("")
            lines.append("| sessions | prefix 1% | list all | peak memory of list all |")
            lines.append("|---|---|---|---|")
            for row in listing:
                prefix, every = row["prefix (1%)"], row["all"]
                lines.append(
                    f"| {row['sessions']:,} | {prefix.trips} ({prefix.seconds * 1000:.0f} ms) | "  # type: ignore[attr-defined]
                    f"{every.trips} ({every.seconds:.2f} s) | {row['peak KiB']} KiB |"  # type: ignore[attr-defined]
                )
            lines.append(
                f"| growth | {growth(listing, 'prefix (1%)', 'trips')} | "
                f"{growth(listing, 'all', 'trips')} | |"
            )
        lines.append("")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes: under 5 minutes")
    parser.add_argument("--backends", default="sqlite,redis,postgres,s3,azure_blob")
    parser.add_argument("--s3-options", default="", help="extra S3 URL options (thresholds)")
    parser.add_argument("--azure-options", default="", help="extra Azure URL options")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--markdown", type=Path)
    args = parser.parse_args()
    results = []
    for name in args.backends.split(","):
        by_appends = name in ("s3", "azure_blob")
        if args.quick:
            records = [100, 1_000, 3_000] if by_appends else [1_000, 10_000, 100_000]
            sessions = [500, 2_000] if by_appends else [1_000, 10_000]
        else:
            records = [100, 1_000, 10_000] if by_appends else [1_000, 10_000, 100_000, 1_000_000]
            sessions = [1_000, 10_000] if by_appends else [1_000, 100_000, 1_000_000]
        print(f"{name}:", flush=True)
        with (
            ExitStack() as stack,
            tempfile.TemporaryDirectory() as workdir,
            target(name, stack, Path(workdir), args) as t,
        ):
            results.append(measure(t, records, sessions))
    text = markdown(results)
    print("\n" + text)
    if args.markdown:
        args.markdown.write_text(text)
    if args.json:

        def plain(value: object) -> object:
            return value.__dict__ if isinstance(value, Cost) else value

        args.json.write_text(
            json.dumps(
                [
                    {
                        "backend": r.backend,
                        "unit": r.unit,
                        "sessions": [
                            {k: plain(v) for k, v in row.items()} for row in r.session_rows
                        ],
                        "listing": [
                            {k: plain(v) for k, v in row.items()} for row in r.listing_rows
                        ],
                    }
                    for r in results
                ],
                indent=2,
            )
        )


if __name__ == "__main__":
    main()
