"""Search (issue 27) on SQLite: indexed query latency, scan throughput, what the index
costs an append.

    python benchmarks/search_bench.py [--sessions 10000] [--messages 50] [--dir /dev/shm]

1. Builds a store of ``--sessions`` sessions of ``--messages`` messages (~300 bytes of
   text each, words drawn from a 5,000-word vocabulary, so a two-word query matches a few
   percent of the messages), one append per session, through the full-text index.
2. Indexed search: the median and p90 wall time of a two-word query's first 20 hits
   (``limit=20``), over ``--queries`` different queries.
3. The scan: ``use_index=False`` for a word no message holds, over the first
   ``--scan-sessions`` sessions (a prefix: rounded down to a power of ten), in MB/s of
   decoded searchable text. ``--scan-backends sqlite,redis,...`` measures only the scan,
   on each backend named, over ``--scan-sessions`` sessions written there.
4. The append: one exchange (two ~300-byte messages) per append, alternately to a file
   with the index kept and to a file opened without ``fulltext`` (the same schema, nothing
   written to the index), ``--appends`` each, interleaved; medians and their ratio, on
   ``--dir`` and (``--disk DIR``) on a disk with ``synchronous=FULL``.
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from pathlib import Path

from chatkeep.core import (
    Message,
    SearchProgress,
    Store,
    TextContent,
    encode_records,
    new_id,
    open_store,
    search,
)
from chatkeep.sqlite import SQLiteStore

_VOCABULARY = 5000


def _words(rng: random.Random) -> list[str]:
    syllables = ["ka", "lo", "mi", "ne", "ru", "sa", "to", "vi", "de", "po", "ar", "el"]
    found: set[str] = set()
    while len(found) < _VOCABULARY:
        found.add("".join(rng.choice(syllables) for _ in range(rng.randint(2, 4))))
    return sorted(found)


def _text(rng: random.Random, words: list[str]) -> str:
    picked: list[str] = []
    while sum(len(w) + 1 for w in picked) < 300:
        picked.append(
            words[min(int(rng.paretovariate(1.2)) - 1, len(words) - 1)]
            if rng.random() < 0.5
            else rng.choice(words)
        )
    return " ".join(picked)


def _session(rng: random.Random, words: list[str], messages: int) -> list[Message]:
    roles = ("user", "assistant")
    return [
        Message(roles[n % 2], [TextContent(_text(rng, words))], message_id=new_id())
        for n in range(messages)
    ]


def build(path: Path, sessions: int, messages: int, rng: random.Random, words: list[str]) -> float:
    store = Store(SQLiteStore(path, synchronous="off"))
    started = time.perf_counter()
    for n in range(sessions):
        store.append(f"s{n:06d}", encode_records(_session(rng, words, messages)))
    store.close()
    return time.perf_counter() - started


def indexed_latency(
    path: Path | str, queries: int, rng: random.Random, words: list[str]
) -> list[float]:
    store = Store(SQLiteStore(path)) if isinstance(path, Path) else open_store(path)
    assert store.fulltext_ready()
    times = []
    common = words[:400]
    for _ in range(queries):
        query = f"{rng.choice(common)} {rng.choice(common)}"
        started = time.perf_counter()
        hits = list(search(store, query, limit=20))
        times.append(time.perf_counter() - started)
        assert len(hits) <= 20
    store.close()
    return times


def scan_prefix(sessions: int) -> str:
    """The prefix of the built store's first ``sessions`` sessions, rounded down to a power
    of ten (``s000`` holds the 1,000 sessions ``s000000`` to ``s000999``)."""
    digits = min(len(str(max(sessions, 1))) - 1, 6)
    return "s" + "0" * (6 - digits)


#: The scan's default query: a word no message holds (every message fails the substring
#: test, none is cut into words).
NOTHING = "zzzznothing"


def scan_throughput(
    store: Store, prefix: str | None = None, query: str = NOTHING
) -> tuple[float, int, float]:
    """The scan (``use_index=False``) of ``store``'s sessions under ``prefix`` for
    ``query`` (by default a word no message holds): seconds, sessions scanned, MB/s of
    decoded searchable text."""
    states: list[SearchProgress] = []
    started = time.perf_counter()
    hits = list(
        search(store, query, limit=None, use_index=False, prefix=prefix, progress=states.append)
    )
    elapsed = time.perf_counter() - started
    assert hits == [] or query != NOTHING
    state = states[-1]
    return elapsed, state.sessions, state.characters / 1e6 / elapsed


def scan_backends(
    names: list[str],
    sessions: int,
    messages: int,
    rng: random.Random,
    words: list[str],
    queries: tuple[str, ...] = (NOTHING,),
) -> None:
    """The scan's throughput on each backend of ``names`` (``sqlite``, ``redis``,
    ``postgres``, ``s3`` on moto, ``azure_blob`` on Azurite, ``encrypted`` over SQLite):
    ``sessions`` sessions of ``messages`` messages in a store of its own, the same
    sessions everywhere, then one scan of them all."""
    from contextlib import ExitStack

    from chatkeep.testing import servers

    batches = [encode_records(_session(rng, words, messages)) for _ in range(sessions)]
    repo = Path(__file__).resolve().parents[1]
    with ExitStack() as cleanup, tempfile.TemporaryDirectory(dir="/dev/shm") as scratch:
        for name in names:
            options: dict[str, str] = {}
            if name == "sqlite":
                url = f"sqlite:///{scratch}/scan.db"
            elif name == "encrypted":
                from chatkeep.encrypted import Keyring

                url = f"encrypted+sqlite:///{scratch}/scan-encrypted.db"
                options["keys"] = "bench:" + Keyring.generate_key()
            elif name == "redis":
                url = servers.redis_store_url(cleanup)
            elif name == "postgres":
                url = servers.postgres_store_url(cleanup)
            elif name == "s3":
                url = servers.s3_store_url(cleanup)
            elif name == "azure_blob":
                url = servers.azure_store_url(cleanup, Path(scratch), repo)
            else:
                raise SystemExit(f"no scan for backend {name!r}")
            store = open_store(url, **options)
            for n, batch in enumerate(batches):
                store.append(f"s{n:06d}", batch)
            for query in queries:
                elapsed, scanned, rate = scan_throughput(store, query=query)
                print(
                    f"scan on {name} for {query!r}: {scanned:,} sessions in {elapsed:.2f} s, "
                    f"{rate:.1f} MB/s"
                )
            store.close()


def append_costs(
    directory: Path, appends: int, rng: random.Random, words: list[str], synchronous: str = "full"
) -> tuple[float, float]:
    with_index = Store(SQLiteStore(directory / "with.db", synchronous=synchronous))
    plain_backend = SQLiteStore(directory / "without.db", synchronous=synchronous)
    without = Store(plain_backend, capabilities=plain_backend.capabilities - {"fulltext"})
    assert with_index.supports("fulltext") and not without.supports("fulltext")
    timed: dict[str, list[float]] = {"with": [], "without": []}
    for n in range(appends):
        for name, store in (
            (("with", with_index), ("without", without))
            if n % 2
            else (("without", without), ("with", with_index))
        ):
            batch = encode_records(_session(rng, words, 2))
            started = time.perf_counter()
            store.append(f"a{n % 50}", batch)
            timed[name].append(time.perf_counter() - started)
    with_index.close()
    without.close()
    return statistics.median(timed["with"]), statistics.median(timed["without"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--messages", type=int, default=50)
    parser.add_argument("--queries", type=int, default=30)
    parser.add_argument("--scan-sessions", type=int, default=1000)
    parser.add_argument("--appends", type=int, default=400)
    parser.add_argument("--dir", default="/dev/shm")
    parser.add_argument("--disk", default=None)
    parser.add_argument("--postgres", default=None, help="also a PostgreSQL URL (a schema)")
    parser.add_argument("--pg-sessions", type=int, default=2000)
    parser.add_argument(
        "--scan-backends",
        default=None,
        help="only the scan, on these backends (comma-separated: sqlite, redis, postgres, "
        "s3, azure_blob, encrypted), --scan-sessions sessions each",
    )
    parser.add_argument(
        "--scan-query",
        action="append",
        default=None,
        help="with --scan-backends: scan for this query (repeatable; default a word no "
        "message holds, so no message is cut into words; two common words make most "
        "messages candidates that are)",
    )
    arguments = parser.parse_args()
    rng = random.Random(27)
    words = _words(rng)
    if arguments.scan_backends:
        names = arguments.scan_backends.split(",")
        queries = tuple(arguments.scan_query or [NOTHING])
        scan_backends(names, arguments.scan_sessions, arguments.messages, rng, words, queries)
        return
    with tempfile.TemporaryDirectory(dir=arguments.dir) as scratch:
        path = Path(scratch) / "search.db"
        seconds = build(path, arguments.sessions, arguments.messages, rng, words)
        size = path.stat().st_size / 1e6
        shape = f"{arguments.sessions:,} sessions x {arguments.messages} messages"
        print(f"built {shape} in {seconds:.1f} s ({size:,.0f} MB)")
        times = sorted(indexed_latency(path, arguments.queries, rng, words))
        median, p90 = statistics.median(times) * 1e3, times[int(len(times) * 0.9)] * 1e3
        print(f"indexed two-word query, first 20 hits: median {median:.1f} ms, p90 {p90:.1f} ms")
        built = Store(SQLiteStore(path))
        elapsed, scanned, rate = scan_throughput(built, scan_prefix(arguments.scan_sessions))
        built.close()
        print(f"scan: {scanned:,} sessions in {elapsed:.2f} s, {rate:.1f} MB/s of decoded text")
        _report(arguments.dir, *append_costs(Path(scratch), arguments.appends, rng, words))
    if arguments.postgres:
        _postgres(arguments.postgres, arguments, rng, words)
    if arguments.disk:
        with tempfile.TemporaryDirectory(dir=arguments.disk) as scratch:
            _report(arguments.disk, *append_costs(Path(scratch), arguments.appends, rng, words))


def _postgres(
    url: str, arguments: argparse.Namespace, rng: random.Random, words: list[str]
) -> None:
    """Build ``--pg-sessions`` sessions at ``url`` (a fresh schema), then the indexed
    query latency and the interleaved append cost with and without the index."""
    store = open_store(url)
    started = time.perf_counter()
    for n in range(arguments.pg_sessions):
        store.append(f"s{n:06d}", encode_records(_session(rng, words, arguments.messages)))
    built = time.perf_counter() - started
    print(f"postgres: built {arguments.pg_sessions:,} x {arguments.messages} in {built:.1f} s")
    times = sorted(indexed_latency(url, arguments.queries, rng, words))
    median, p90 = statistics.median(times) * 1e3, times[int(len(times) * 0.9)] * 1e3
    print(f"postgres indexed two-word query, first 20: median {median:.1f} ms, p90 {p90:.1f} ms")
    plain = open_store(url)
    without = Store(plain.backend, capabilities=plain.capabilities - {"fulltext"})
    timed: dict[str, list[float]] = {"with": [], "without": []}
    for n in range(arguments.appends):
        order = (("with", store), ("without", without))
        for name, target in order if n % 2 else order[::-1]:
            batch = encode_records(_session(rng, words, 2))
            begun = time.perf_counter()
            target.append(f"a{n % 50}", batch)
            timed[name].append(time.perf_counter() - begun)
    _report("postgres", statistics.median(timed["with"]), statistics.median(timed["without"]))
    store.close()
    plain.close()


def _report(where: str, with_index: float, without: float) -> None:
    ratio = with_index / without
    costs = f"with index {with_index * 1e6:.0f} us, without {without * 1e6:.0f} us"
    print(f"append on {where} (synchronous=full): {costs}, ratio {ratio:.2f}x")


if __name__ == "__main__":
    main()
