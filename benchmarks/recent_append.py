"""What the ``recent`` index costs an append: A/B of two checkouts of chatkeep.

    python benchmarks/recent_append.py --before /path/to/old/checkout [--rounds 6] [--appends 300]

``--before`` is a directory holding an older checkout's ``core/src`` and
``plugins/{sqlite,redis,postgres}/src`` (for example ``git archive <commit> core/src
plugins | tar -x -C /tmp/before``); the code of this checkout is "after". Each round runs
one child process per variant and backend, alternating A and B, each appending
``--appends`` one-exchange batches (two 300-byte records) to fresh sessions of its own
database, file, schema or key prefix, and reports per append:

- ``cpu_us``: the child's CPU time (``time.process_time``) per append, client side.
- sqlite ``wal_bytes`` / ``wal_pages``: WAL growth per append (checkpoints off).
- redis ``server_us``: the append script's ``usec_per_call`` on a private ``redis-server``
  the harness starts on a spare port (``INFO commandstats``).
- ``wall_us``: wall time per append (for postgres, whose server-side work this includes;
  noisy on a shared machine, so compare medians only).

Medians over the rounds are printed as a table (and as JSON with ``--json``).
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MEMBERS = ("core/src", "plugins/sqlite/src", "plugins/redis/src", "plugins/postgres/src")
POSTGRES_URL = os.environ.get(
    "CHATKEEP_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
)

_CHILD = r"""
import json, os, sys, time
from chatkeep.core import Record, open_store
backend, target, appends = sys.argv[1], sys.argv[2], int(sys.argv[3])
body = b'{"type": "message", "role": "user", "text": "' + b"x" * 260 + b'"}'
store = open_store(target)
store.append("warm", [Record("w", body)])
out = {}
if backend == "sqlite":
    connection = store.backend._handle().connection
    connection.execute("PRAGMA wal_autocheckpoint = 0")
    connection.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    page = connection.execute("PRAGMA page_size").fetchone()[0]
    wal = store.backend.path + "-wal"
    size = os.path.getsize(wal)
started, wall = time.process_time(), time.perf_counter()
for n in range(appends):
    store.append(f"s{n % 50}", [Record(f"u{n}", body), Record(f"a{n}", body)])
out["cpu_us"] = (time.process_time() - started) / appends * 1e6
out["wall_us"] = (time.perf_counter() - wall) / appends * 1e6
if backend == "sqlite":
    grown = os.path.getsize(wal) - size
    out["wal_bytes"] = grown / appends
    out["wal_pages"] = grown / (page + 24) / appends
print(json.dumps(out))
store.close()
"""


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _child(variant: str, before: Path, backend: str, target: str, appends: int) -> dict[str, float]:
    env = dict(os.environ)
    if variant == "before":
        env["PYTHONPATH"] = os.pathsep.join(str(before / member) for member in MEMBERS)
    result = subprocess.run(
        [sys.executable, "-c", _CHILD, backend, target, str(appends)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return dict(json.loads(result.stdout.strip().splitlines()[-1]))


def _redis_server_us(port: int) -> tuple[float, int]:
    """Total microseconds and calls of the scripts (EVALSHA and the EVAL fallback)."""
    import redis

    client = redis.Redis(port=port)
    stats = client.info("commandstats")
    client.close()
    usec = calls = 0
    for name in ("evalsha", "eval"):
        entry = stats.get(f"cmdstat_{name}") or stats.get(name) or {}
        usec += int(entry.get("usec", 0))
        calls += int(entry.get("calls", 0))
    return float(usec), calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--before", type=Path, required=True)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--appends", type=int, default=300)
    parser.add_argument("--backends", default="sqlite,redis,postgres")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    backends = args.backends.split(",")
    folder = Path(tempfile.mkdtemp(prefix="ck-recent-bench-"))
    results: dict[str, dict[str, dict[str, list[float]]]] = {}
    redis_process = None
    port = _free_port()
    if "redis" in backends:
        redis_process = subprocess.Popen(
            ["redis-server", "--port", str(port), "--save", "", "--appendonly", "no"],
            stdout=subprocess.DEVNULL,
        )
        time.sleep(0.5)
    token = secrets.token_hex(4)
    import psycopg
    from psycopg import sql

    try:
        for round_number in range(args.rounds):
            variants = ("before", "after") if round_number % 2 == 0 else ("after", "before")
            for backend in backends:
                for variant in variants:
                    run = f"{variant}-{round_number}"
                    row = results.setdefault(backend, {}).setdefault(variant, {})
                    if backend == "sqlite":
                        target = f"sqlite:///{folder / (run + '.db')}"
                    elif backend == "redis":
                        import redis

                        redis.Redis(port=port).config_resetstat()
                        target = f"redis://127.0.0.1:{port}/0?key_prefix=ckbench-{token}-{run}:"
                    else:
                        schema = f"ck_bench_recent_{token}_{variant}_{round_number}"
                        target = f"{POSTGRES_URL}?schema={schema}"
                    measured = _child(variant, args.before, backend, target, args.appends)
                    if backend == "redis":
                        usec, calls = _redis_server_us(port)
                        measured["server_us"] = usec / max(calls, 1)
                    if backend == "postgres":
                        with psycopg.connect(POSTGRES_URL, autocommit=True) as admin:
                            admin.execute(
                                sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(
                                    sql.Identifier(schema)
                                )
                            )
                    for key, value in measured.items():
                        row.setdefault(key, []).append(value)
    finally:
        if redis_process is not None:
            redis_process.terminate()
            redis_process.wait()
        shutil.rmtree(folder, ignore_errors=True)
    medians = {
        backend: {
            variant: {key: statistics.median(values) for key, values in figures.items()}
            for variant, figures in by_variant.items()
        }
        for backend, by_variant in results.items()
    }
    print(f"{'backend':10} {'figure':10} {'before':>10} {'after':>10}")
    for backend, by_variant in medians.items():
        for key in by_variant["after"]:
            print(
                f"{backend:10} {key:10} {by_variant['before'].get(key, float('nan')):10.1f} "
                f"{by_variant['after'][key]:10.1f}"
            )
    if args.json:
        args.json.write_text(json.dumps({"medians": medians, "raw": results}, indent=2))


if __name__ == "__main__":
    main()
