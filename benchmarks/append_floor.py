"""The backends' own floor (issue 29): chatkeep's record-level turn and whole-session read
against the raw driver's, interleaved in one run, per backend.

    python benchmarks/append_floor.py [--quick] [--backends sqlite,redis,postgres]
                                      [--lengths 10,1000,10000] [--json results.json]

Rows per backend (all blocking, all undecoded bytes):

- ``raw <driver>``, ``chatkeep Store``, ``chatkeep backend alone``: the ``rec`` rows of
  ``run.py`` (read the last 50 records, append two).
- ``raw <driver> (whole, records)`` and ``chatkeep backend alone (whole, records)``: one
  read of the whole session as it is stored (rows or list elements; ``Record`` objects),
  nothing appended.

SQLite runs twice: on tmpfs (``/dev/shm``, no fsync cost) and on the disk with
``synchronous=FULL`` (chatkeep's default), since the two move the ratios in different
directions. Everything else as ``run.py`` (servers, throwaway namespaces, cleanup).
"""

from __future__ import annotations

import argparse
import gc
import json
import secrets
import shutil
import statistics
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from chatkeep_bench.backends import Context, ServiceMissing, setup
from chatkeep_bench.measure import Runner
from chatkeep_bench.variants import AnyVariant, ChatkeepBackend, Unavailable, Variant
from chatkeep_bench.workload import Settings

#: The setups measured: (label, backend module, where SQLite's files go).
SETUPS = {
    "sqlite-tmpfs": ("sqlite", Path("/dev/shm")),
    "sqlite-disk": ("sqlite", None),
    "redis": ("redis", None),
    "postgres": ("postgres", None),
}


class WholeRecords(Variant):
    """A whole-session read at the records level: ``inner``'s fill, then ``read(sid)``."""

    level = "full"

    def __init__(self, inner: Any, name: str, read: Callable[[Any, str], object]) -> None:
        self.inner = inner
        self.name = name
        self.kind = inner.kind
        self._read = read

    def open(self) -> None:
        self.inner.open()

    def fill(self, session_id: str, count: int) -> None:
        self.inner.fill(session_id, count)

    def load(self, session_id: str) -> object:
        return self._read(self.inner, session_id)

    def turn(self, session_id: str, number: int) -> None:
        self._read(self.inner, session_id)

    def close(self) -> None:
        self.inner.close()


def _raw_whole(backend: str, raw: Any) -> Callable[[Any, str], object]:
    if backend == "sqlite":
        statement = "SELECT message_id, data FROM messages WHERE session_id = ? ORDER BY seq"
        return lambda inner, sid: inner._connection().execute(statement, (sid,)).fetchall()
    if backend == "redis":
        return lambda inner, sid: inner._client.lrange(inner._prefix + sid, 0, -1)
    return lambda inner, sid: (
        inner._connection.cursor(binary=True).execute(inner._sql.all, (sid,)).fetchall()
    )


def _variants(backend: str, context: Context) -> tuple[list[AnyVariant], Any]:
    run = setup(backend, context)
    chosen: list[AnyVariant] = []
    for variant in run.variants:
        if isinstance(variant, Unavailable) or variant.is_async or variant.level != "records":
            continue
        chosen.append(variant)
    raw = chosen[0]
    if backend == "sqlite":
        whole_raw = type(raw)(context.workdir / "sqlite" / "raw_whole.db", decode=False)
    else:  # a second instance of the raw row, on keys or a table of its own
        whole_raw = _clone_raw(backend, raw, context.token)
    backend_row = next(v for v in chosen if isinstance(v, ChatkeepBackend))
    whole_chatkeep = ChatkeepBackend(
        backend_row._url.replace("ckb:", "ckw:")
        .replace("=b_", "=w_")
        .replace("chatkeep_backend", "chatkeep_whole")
    )
    chosen.append(WholeRecords(whole_raw, f"{raw.name} (whole, records)", _raw_whole(backend, raw)))
    chosen.append(
        WholeRecords(
            whole_chatkeep,
            "chatkeep backend alone (whole, records)",
            lambda inner, sid: inner.store.backend.read(sid, 0, None),
        )
    )
    return chosen, run


def _clone_raw(backend: str, raw: Any, token: str) -> Any:
    if backend == "redis":
        clone = type(raw).__new__(type(raw))
        clone.__dict__.update(raw.__dict__)
        clone._prefix = raw._prefix.replace("raw:", "rawwhole:")
        clone._client = None
        return clone
    from chatkeep_bench.backends.postgres import _Statements

    clone = type(raw).__new__(type(raw))
    clone.__dict__.update(raw.__dict__)
    clone._sql = _Statements(f"ck_bench_{token}", "raw_whole")
    clone._connection = clone._pool = None
    return clone


def _summary(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return statistics.median(ordered) * 1e3, p99 * 1e3


def measure(label: str, settings: Settings, token: str) -> list[dict[str, Any]]:
    """Every row of one setup at every length."""
    backend, folder = SETUPS[label]
    workdir = Path(tempfile.mkdtemp(prefix=f"ckfloor-{token}-", dir=folder))
    runner = Runner(settings, f"{token}{label[:1]}")
    rows: list[dict[str, Any]] = []
    run = None
    try:
        try:
            variants, run = _variants(backend, Context(token=token, workdir=workdir, peers=False))
        except ServiceMissing as missing:
            print(f"[{label}] skipped: {missing}", flush=True)
            return []
        for variant in variants:
            runner.call(variant.open())
        gc.collect()
        for length in settings.lengths:
            samples, _ = runner.latency(variants, length)
            for variant in variants:
                if samples.get(variant.name):
                    median, p99 = _summary(samples[variant.name])
                    rows.append({"setup": label, "length": length, "row": variant.name,
                                 "median": median, "p99": p99})  # fmt: skip
            print(f"[{label}] {length:,} done", flush=True)
        for variant in variants:
            runner.call(variant.close())
    finally:
        if run is not None:
            run.cleanup()
        runner.close()
        shutil.rmtree(workdir, ignore_errors=True)
    return rows


def table(rows: list[dict[str, Any]]) -> list[str]:
    """Markdown: median (p99) in ms and the median as a multiple of the raw row's."""
    lines = ["| setup | length | row | median ms (p99) | x raw |", "|---|---:|---|---:|---:|"]
    for row in rows:
        whole = "(whole" in row["row"]
        raw = next(
            r for r in rows
            if r["setup"] == row["setup"] and r["length"] == row["length"]
            and r["row"].startswith("raw") and ("(whole" in r["row"]) == whole
        )  # fmt: skip
        lines.append(
            f"| {row['setup']} | {row['length']:,} | {row['row']} | "
            f"{row['median']:.3f} ({row['p99']:.3f}) | {row['median'] / raw['median']:.2f} |"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    """Run the setups asked for; 0 unless nothing could be measured."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--setups", default=",".join(SETUPS))
    parser.add_argument("--lengths", default="10,1000,10000")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    lengths = tuple(int(x) for x in args.lengths.split(",") if x)
    settings = Settings.preset(quick=args.quick, lengths=lengths, threads=1, seed=args.seed)
    token = secrets.token_hex(4)
    rows: list[dict[str, Any]] = []
    for label in [s.strip() for s in args.setups.split(",") if s.strip()]:
        if label not in SETUPS:
            parser.error(f"unknown setup {label!r}; choose from {', '.join(SETUPS)}")
        rows += measure(label, settings, token)
    print("\n".join(table(rows)))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")
    return 0 if rows else 1


if __name__ == "__main__":
    sys.exit(main())
