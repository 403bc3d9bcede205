"""What the framework benchmarks (``langgraph``, ``google_adk``, ``pydantic_ai_store``,
``edit_frameworks``) share: their command line, the summary of a row's samples, the table
that sets chatkeep's rows beside a peer's, and the lines that say which target each row
meets."""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["Target", "ratio_table", "run", "summary", "target_lines"]


def summary(samples: list[float]) -> dict[str, float]:
    """The median and the 99th percentile of ``samples`` (milliseconds)."""
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return {"median": statistics.median(ordered), "p99": p99}


def ratio_table(
    rows: list[dict[str, Any]], who: str, length: str, columns: Sequence[tuple[str, str]]
) -> Iterator[str]:
    """Markdown: a line per row (``backend``, ``length``, ``who``), each column's median
    (p99); a chatkeep row (``who`` starting with ``chatkeep``) also as a multiple of the
    first other row of its backend and length (the peer)."""
    titles = " | ".join(title for _key, title in columns)
    yield f"| backend | {length} | {who} | {titles} |"
    yield "|---|---:|---|" + "---:|" * len(columns)
    for row in rows:
        peer = next(
            (
                other
                for other in rows
                if other["backend"] == row["backend"]
                and other["length"] == row["length"]
                and not other[who].startswith("chatkeep")
            ),
            None,
        )
        cells = []
        for key, _title in columns:
            text = f"{row[key]['median']:.2f} ({row[key]['p99']:.2f})"
            if row[who].startswith("chatkeep") and peer is not None:
                text += f" = {row[key]['median'] / peer[key]['median']:.2f}x"
            cells.append(text)
        yield f"| {row['backend']} | {row['length']:,} | {row[who]} | " + " | ".join(cells) + " |"


@dataclass(frozen=True)
class Target:
    """A target of an issue: row ``subject``'s median of ``column`` at most ``at_most`` times
    row ``peer``'s (or ``peer (...)``'s: the peer's driver in brackets), on ``backend``
    (every backend with both rows: ``None``), at every length measured. ``at_most=1/1.5``:
    at least 1.5x faster; ``1.0``: at least as fast."""

    subject: str
    peer: str
    column: str
    at_most: float
    backend: str | None = None

    def __str__(self) -> str:
        if self.at_most < 1.0:
            bound = f"at least {1 / self.at_most:.3g}x faster than"
        elif self.at_most == 1.0:
            bound = "at least as fast as"
        else:
            bound = f"within {self.at_most:.3g}x of"
        return f"{self.subject} {self.column} {bound} {self.peer}"


def _is_peer(name: str, peer: str) -> bool:
    return name == peer or name.startswith(f"{peer} (")


def target_lines(rows: list[dict[str, Any]], who: str, targets: Sequence[Target]) -> Iterator[str]:
    """One line per target and measured (backend, length): the ratio of the medians and
    whether the target is met; a target with no rows to judge it by says so (never met)."""
    yield ""
    yield "Targets (chatkeep's median / the peer's median):"
    for target in targets:
        judged = False
        for row in rows:
            if row[who] != target.subject or target.backend not in (None, row["backend"]):
                continue
            peer = next(
                (
                    other
                    for other in rows
                    if _is_peer(other[who], target.peer)
                    and other["backend"] == row["backend"]
                    and other["length"] == row["length"]
                ),
                None,
            )
            if peer is None:
                continue
            judged = True
            ratio = row[target.column]["median"] / peer[target.column]["median"]
            verdict = "met" if ratio <= target.at_most else "NOT met"
            yield (
                f"- {verdict}: {target} on {row['backend']} at {row['length']:,}: "
                f"{ratio:.3f}x (limit {target.at_most:.3f}x)"
            )
        if not judged:
            yield f"- NOT measured: {target}" + (f" on {target.backend}" if target.backend else "")


Measure = Callable[[str, list[int], int, int, Path], list[dict[str, Any]]]


def run(
    argv: list[str] | None,
    *,
    description: str,
    backends: Sequence[str],
    measure: Measure,
    table: Callable[[list[dict[str, Any]]], Iterator[str]],
    rounds: int,
    quick_rounds: int,
    default_lengths: str = "10,100,1000",
    targets: Callable[[list[dict[str, Any]]], Iterator[str]] | None = None,
) -> int:
    """The command line of a framework benchmark: ``[--quick] [--backends a,b]
    [--lengths 10,100,1000] [--rounds N] [--seed N] [--json FILE] [--folder DIR]``;
    ``measure(backend, lengths, rounds, seed, folder)`` per backend (one whose server is
    missing is skipped with the reason), then the table, then ``targets(rows)`` (each
    target met or not). 0 unless nothing could be measured."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--quick", action="store_true", help="fewer rounds and lengths")
    parser.add_argument("--backends", default=",".join(backends))
    parser.add_argument("--lengths", default=default_lengths)
    parser.add_argument("--rounds", type=int, default=rounds)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", type=Path)
    parser.add_argument(
        "--folder", default=None, help="where files go (default: the system's temporary folder)"
    )
    args = parser.parse_args(argv)
    lengths = [int(x) for x in args.lengths.split(",") if x]
    rounds = args.rounds
    if args.quick:
        lengths, rounds = [min(lengths), max(lengths)], min(rounds, quick_rounds)
    warnings.filterwarnings("ignore")
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="ckbench-", dir=args.folder) as folder:
        for backend in [b.strip() for b in args.backends.split(",") if b.strip()]:
            if backend not in backends:
                parser.error(f"unknown backend {backend!r}; choose from {', '.join(backends)}")
            try:
                rows += measure(backend, lengths, rounds, args.seed, Path(folder))
            except (OSError, ImportError) as exc:
                print(f"[{backend}] skipped: {type(exc).__name__}: {exc}")
            except Exception as exc:  # a server missing: say so, go on with the others
                if type(exc).__module__.split(".")[0] not in ("psycopg", "redis"):
                    raise
                print(f"[{backend}] skipped: {type(exc).__name__}: {exc}")
    print()
    for line in table(rows):
        print(line)
    if targets is not None:
        for line in targets(rows):
            print(line)
    if args.json:
        with suppress(OSError):
            args.json.write_text(json.dumps(rows, indent=2))
    return 0 if rows else 1
