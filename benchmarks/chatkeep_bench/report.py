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

__all__ = [
    "BackendResult",
    "Row",
    "format_backend",
    "format_markdown",
    "format_summary",
    "format_targets",
]


@dataclass
class Row:
    """One variant's results on one backend."""

    name: str
    level: str
    kind: str
    mode: str
    note: str = ""
    elsewhere: bool = False
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
        return cls(
            variant.name,
            variant.level,
            variant.kind,
            mode,
            note=variant.note,
            elsewhere=variant.elsewhere,
        )

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
    level = {"records": "rec", "messages": "msg"}.get(row.level, "all")
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


# -- the targets (issues 12 and 18) -------------------------------------------------------

#: chatkeep's messages-level turn may cost at most this many times the raw driver's.
RAW_LIMIT = 1.3
#: ... and must be at least this many times faster than the fastest peer on its backend.
PEER_MARGIN = 1.5
#: ... and grow less than this from the shortest to the longest history.
FLAT_LIMIT = 1.3
#: Full loads are judged from this length on (a load of 10 messages is mostly the call).
FULL_FROM = 1000
#: (backend, adapter row, the framework's own store): the adapter at least as fast.
ADAPTER_PAIRS = [
    ("sqlite", "chatkeep ChatkeepSession (Agents SDK)", "Agents SQLiteSession"),
    ("redis", "chatkeep ChatkeepSession (Agents SDK)", "Agents RedisSession"),
    ("redis", "MAF ChatkeepHistoryProvider (whole session)", "MAF RedisHistoryProvider"),
    ("redis", "MAF ChatkeepHistoryProvider (max_messages=50)", "MAF RedisHistoryProvider"),
]
_TURN_ROWS = (
    "chatkeep HistoryProvider",
    "chatkeep HistoryProvider (resumed session)",
    "chatkeep read_view + append",
)
_FULL_ROWS = ("chatkeep read_view (whole session)", "chatkeep aread_view (whole session)")


def _verdict(ok: bool | None) -> str:
    return {True: "met", False: "NOT MET", None: "n/a"}[ok]


def _measured(result: BackendResult, name: str) -> Row | None:
    for row in result.rows:
        if row.name == name and not (row.unavailable or row.failure) and row.latency:
            return row
    return None


def _ratios(row: Row, other: Row, lengths: tuple[int, ...]) -> dict[int, float]:
    out = {}
    for length in lengths:
        mine, theirs = row.median(length), other.median(length)
        if mine is not None and theirs:
            out[length] = mine / theirs
    return out


def _cells(ratios: dict[int, float]) -> str:
    return "  ".join(f"L={length:,} x{ratio:.2f}" for length, ratio in ratios.items())


def format_targets(results: list[BackendResult]) -> str:
    """Per backend, whether each speed target is met in this run: the messages-level
    turns within ``RAW_LIMIT`` of raw, flat, ``PEER_MARGIN`` faster than the fastest peer
    on the backend; full loads within ``RAW_LIMIT``; each adapter at least as fast as its
    framework's own store. Ratios are medians of this one interleaved run."""
    lines = ["", "== targets (median ratios of this run; lower is better)"]
    for result in results:
        if result.skipped:
            continue
        name = result.name
        peers = [
            row
            for row in result.rows
            if row.kind == "peer"
            and row.level == "messages"
            and not row.elsewhere
            and _measured(result, row.name)
        ]
        for turn_name in _TURN_ROWS:
            row = _measured(result, turn_name)
            base = result.baseline(row) if row else None
            if row is None or base is None:
                continue
            ratios = _ratios(row, base, result.lengths)
            ok = all(ratio <= RAW_LIMIT for ratio in ratios.values()) if ratios else None
            lines.append(
                f"{name:<10} {turn_name} ({row.mode}) <= {RAW_LIMIT}x {base.name}: "
                f"{_verdict(ok)}  {_cells(ratios)}"
            )
            medians = [row.median(length) for length in result.lengths]
            if len(result.lengths) > 1 and medians[0] and medians[-1]:
                growth = medians[-1] / medians[0]
                lines.append(
                    f"{name:<10} {turn_name} ({row.mode}) flat, < {FLAT_LIMIT}x from "
                    f"L={result.lengths[0]:,} to L={result.lengths[-1]:,}: "
                    f"{_verdict(growth < FLAT_LIMIT)}  x{growth:.2f}"
                )
            if peers:
                margins = {}
                for length in result.lengths:
                    mine = row.median(length)
                    fastest = min(
                        (p.median(length) for p in peers if p.median(length)), default=None
                    )
                    if mine and fastest:
                        margins[length] = fastest / mine
                ok = all(m >= PEER_MARGIN for m in margins.values()) if margins else None
                fastest_names = sorted(
                    {
                        min(peers, key=lambda p, n=length: p.median(n) or math.inf).name
                        for length in margins
                    }
                )
                lines.append(
                    f"{name:<10} {turn_name} ({row.mode}) >= {PEER_MARGIN}x faster than the "
                    f"fastest peer ({', '.join(fastest_names)}): {_verdict(ok)}  "
                    + "  ".join(f"L={n:,} {m:.2f}x faster" for n, m in margins.items())
                )
        for full_name in _FULL_ROWS:
            row = _measured(result, full_name)
            base = result.baseline(row) if row else None
            if row is None or base is None:
                continue
            ratios = _ratios(row, base, result.lengths)
            judged = [ratio for length, ratio in ratios.items() if length >= FULL_FROM]
            ok = all(ratio <= RAW_LIMIT for ratio in judged) if judged else None
            lines.append(
                f"{name:<10} {full_name} ({row.mode}) <= {RAW_LIMIT}x {base.name} "
                f"from L={FULL_FROM:,}: {_verdict(ok)}  {_cells(ratios)}"
            )
        for backend, adapter_name, store_name in ADAPTER_PAIRS:
            if backend != name:
                continue
            adapter, store = _measured(result, adapter_name), _measured(result, store_name)
            if adapter is None or store is None:
                continue
            ratios = _ratios(adapter, store, result.lengths)
            ok = all(ratio <= 1.0 for ratio in ratios.values()) if ratios else None
            lines.append(
                f"{name:<10} {adapter_name} <= 1.0x {store_name}: {_verdict(ok)}  {_cells(ratios)}"
            )
    return "\n".join(lines) + "\n"
