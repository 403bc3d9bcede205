"""Results and the tables printed from them.

Every ratio says how many times the raw driver's cost a row pays (lower is better; 1.00 is
the driver): latency median ÷ the raw median, raw turns/s ÷ the row's turns/s, peak bytes ÷
the raw peak. A row is compared with the raw row of its level (records or messages) and
mode (sync or async), or with the sync raw row of its level when the backend has no native
async driver (SQLite).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Any

from .variants import AnyVariant, AsyncVariant, Unavailable

__all__ = ["BackendResult", "Row", "format_backend", "format_markdown", "format_summary"]


@dataclass
class Row:
    """One variant's results on one backend."""

    name: str
    level: str
    kind: str
    mode: str
    note: str = ""
    unavailable: str | None = None
    failure: str | None = None
    latency: dict[int, list[float]] = field(default_factory=dict)
    memory: dict[int, int | None] = field(default_factory=dict)
    throughput: float | None = None

    @classmethod
    def of(cls, variant: AnyVariant | Unavailable) -> Row:
        """An empty row for ``variant``."""
        if isinstance(variant, Unavailable):
            return cls(variant.name, variant.level, variant.kind, "", unavailable=variant.reason)
        mode = "async" if isinstance(variant, AsyncVariant) else "sync"
        return cls(variant.name, variant.level, variant.kind, mode, note=variant.note)

    def median(self, length: int) -> float | None:
        """Median seconds per turn at ``length``."""
        samples = self.latency.get(length)
        return statistics.median(samples) if samples else None

    def p99(self, length: int) -> float | None:
        """Nearest-rank 99th percentile (the maximum below 100 samples)."""
        samples = self.latency.get(length)
        if not samples:
            return None
        ordered = sorted(samples)
        return ordered[max(math.ceil(0.99 * len(ordered)) - 1, 0)]

    def as_json(self) -> dict[str, Any]:
        """Everything, with summary statistics, for ``--json``."""
        return {
            "name": self.name,
            "level": self.level,
            "kind": self.kind,
            "mode": self.mode,
            "note": self.note,
            "unavailable": self.unavailable,
            "failure": self.failure,
            "latency": {
                str(length): {
                    "turns": len(samples),
                    "median_s": self.median(length),
                    "p99_s": self.p99(length),
                }
                for length, samples in self.latency.items()
            },
            "peak_bytes": {str(length): peak for length, peak in self.memory.items()},
            "turns_per_second": self.throughput,
        }


@dataclass
class BackendResult:
    """All rows of one backend."""

    name: str
    where: str
    lengths: tuple[int, ...]
    threads: int
    throughput_length: int
    rows: list[Row]
    skipped: str | None = None

    def baseline(self, row: Row) -> Row | None:
        """The raw row ``row`` is compared with."""
        candidates = [r for r in self.rows if r.kind == "raw" and r.level == row.level]
        for wanted in (row.mode, "sync"):
            for candidate in candidates:
                if candidate.mode == wanted:
                    return candidate
        return None

    def as_json(self) -> dict[str, Any]:
        """For ``--json``."""
        return {
            "backend": self.name,
            "where": self.where,
            "skipped": self.skipped,
            "rows": [
                {**row.as_json(), "baseline": getattr(self.baseline(row), "name", None)}
                for row in self.rows
            ],
        }


def _ms(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    value = seconds * 1000
    if value < 1:
        return f"{value:.3f}"
    if value < 10:
        return f"{value:.2f}"
    if value < 100:
        return f"{value:.1f}"
    return f"{value:.0f}"


def _ratio(value: float | None, base: float | None) -> str:
    if value is None or not base:
        return "-"
    ratio = value / base
    return f"{ratio:.2f}" if ratio < 100 else f"{ratio:.0f}"


def _kib(value: int | None) -> str:
    return "-" if value is None else f"{value / 1024:.0f}"


def _label(row: Row) -> str:
    level = "rec" if row.level == "records" else "msg"
    return f"{row.name[:44]:<44} {level} {row.mode or '':<5}"


def format_backend(result: BackendResult) -> str:
    """The two tables of one backend: latency; then throughput and memory."""
    if result.skipped:
        return f"\n== {result.name}: skipped ({result.skipped})\n"
    lines = [
        f"\n== {result.name}: {result.where}",
        "turn = load the last 50 messages + append 2 (~300 B each). Latency per turn in ms, "
        "median and p99; xraw = median / the raw driver's median (same level and mode).",
    ]
    head = f"{'variant':<44} lvl mode "
    for length in result.lengths:
        head += f"| {'L=' + format(length, ','):^22} "
    lines.append(head)
    lines.append(f"{'':<55}" + "| median    p99   xraw " * len(result.lengths))
    notes: list[str] = []
    for row in result.rows:
        label = _label(row)
        if row.unavailable or row.failure:
            reason = row.unavailable or f"failed: {row.failure}"
            lines.append(f"{label}| {reason}")
            continue
        base = result.baseline(row)
        cells = ""
        for length in result.lengths:
            median = row.median(length)
            reference = base.median(length) if base else None
            cells += f"| {_ms(median):>6} {_ms(row.p99(length)):>6} {_ratio(median, reference):>6} "
        lines.append(label + cells)
        if row.note:
            notes.append(f"  {row.name}: {row.note}")
    lines += [
        "",
        f"throughput: {result.threads} sessions at once, history "
        f"{result.throughput_length}; peak: Python memory of one load of the last 50 "
        "(tracemalloc), KiB",
    ]
    head = f"{'variant':<44} lvl mode | turns/s   xraw "
    for length in result.lengths:
        head += f"| {'peak L=' + format(length, ','):>14} "
    lines.append(head + "| xraw")
    for row in result.rows:
        if row.unavailable or row.failure:
            continue
        base = result.baseline(row)
        rate = row.throughput
        base_rate = base.throughput if base else None
        ratio = _ratio(base_rate, rate) if rate else "-"
        cells = f"| {rate or 0:>7.0f} {ratio:>6} " if rate else "| failed         "
        for length in result.lengths:
            cells += f"| {_kib(row.memory.get(length)):>14} "
        largest = result.lengths[-1]
        peak = row.memory.get(largest)
        base_peak = base.memory.get(largest) if base else None
        cells += f"| {_ratio(peak, base_peak)}"
        lines.append(_label(row) + cells)
    if notes:
        lines += ["", "notes:", *notes]
    return "\n".join(lines) + "\n"


def format_summary(results: list[BackendResult]) -> str:
    """One line per backend and chatkeep row: its ratios to the raw driver."""
    lines = ["", "== summary: chatkeep / raw driver (median latency per turn; throughput)"]
    for result in results:
        if result.skipped:
            lines.append(f"{result.name:<10} skipped ({result.skipped})")
            continue
        for row in result.rows:
            if row.kind != "chatkeep" or row.unavailable or row.failure:
                continue
            base = result.baseline(row)
            if base is None:
                continue
            parts = [
                f"L={length:,} x{_ratio(row.median(length), base.median(length))}"
                for length in result.lengths
            ]
            throughput = _ratio(base.throughput, row.throughput) if row.throughput else "-"
            lines.append(
                f"{result.name:<10} {row.name:<28} {row.mode:<5} vs {base.name:<24} "
                + "  ".join(parts)
                + f"  throughput x{throughput}"
            )
    return "\n".join(lines) + "\n"


def format_markdown(results: list[BackendResult], title: str) -> str:
    """The results as Markdown tables (``--markdown``), one per backend: median ms and
    x raw per history length, throughput and its ratio, peak KiB at the largest length."""
    lines = [title, ""]
    for result in results:
        if result.skipped:
            lines += [f"**{result.name}**: skipped ({result.skipped})", ""]
            continue
        largest = result.lengths[-1]
        head = ["variant", "level", "mode"]
        head += [f"L={length:,} ms (x raw)" for length in result.lengths]
        head += [f"turns/s, {result.threads} sessions (x raw)", f"peak KiB, L={largest:,}"]
        lines += [f"**{result.name}**: {result.where}", ""]
        lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for row in result.rows:
            cells = [row.name, row.level, row.mode or "-"]
            if row.unavailable or row.failure:
                reason = row.unavailable or f"failed: {row.failure}"
                cells += [reason] + [""] * (len(head) - 4)
                lines.append("| " + " | ".join(cells) + " |")
                continue
            base = result.baseline(row)
            for length in result.lengths:
                median = row.median(length)
                reference = base.median(length) if base else None
                cells.append(f"{_ms(median)} ({_ratio(median, reference)})")
            base_rate = base.throughput if base else None
            rate = row.throughput
            cells.append(f"{rate:.0f} ({_ratio(base_rate, rate)})" if rate else "-")
            cells.append(_kib(row.memory.get(largest)))
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)
