"""Printing tables and progress: rich on a terminal, plain text otherwise.

rich is imported only when a table or a progress bar is drawn on a terminal, so commands that
print plain text (and every command writing into a pipe) do not pay for it at start-up.
"""

from __future__ import annotations

import shutil
import sys
import time
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import IO, Any

__all__ = ["Progress", "print_table"]


def print_table(
    headers: Sequence[str], rows: Sequence[Sequence[str]], *, out: IO[str] | None = None
) -> None:
    """Columns under ``headers``: a rich table on a terminal wide enough for every cell,
    aligned plain text otherwise (never a cut id; stable for ``grep``, ``awk``, ``head``)."""
    stream = sys.stdout if out is None else out
    widths = [len(h) for h in headers]
    for row in rows:
        widths = [max(w, len(cell)) for w, cell in zip(widths, row, strict=True)]
    # rich's simple box pads each column by one space a side and separates them by one.
    if stream.isatty() and sum(widths) + 3 * len(widths) <= shutil.get_terminal_size().columns:
        from rich import box
        from rich.console import Console
        from rich.table import Table

        table = Table(*headers, box=box.SIMPLE_HEAD, pad_edge=False, header_style="bold")
        for row in rows:
            table.add_row(*row)
        Console(file=stream).print(table)
        return
    for row in [headers, *rows]:
        line = "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True))
        print(line.rstrip(), file=stream)


class Progress:
    """Progress of a transfer: a rich bar (sessions, records, rate, ETA) when ``stream`` is
    a terminal, otherwise a plain line at most every ``interval`` seconds and one at the end.

    Use as a context manager; :meth:`update` takes the transfer API's ``TransferProgress``.
    """

    def __init__(self, verb: str, *, stream: IO[str] | None = None, interval: float = 1.0):
        self.verb = verb
        self.stream = sys.stderr if stream is None else stream
        self.interval = interval
        self._rich: Any = None
        self._task: Any = None
        self._last_line = 0.0
        self._last: Any = None
        self._printed = False

    def __enter__(self) -> Progress:
        self._last_line = time.monotonic()  # a plain line once a second, not at once
        self._printed = False
        if self.stream.isatty():
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )
            from rich.progress import Progress as RichProgress

            self._rich = RichProgress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("sessions  {task.fields[records]} records  {task.fields[rate]}"),
                TimeElapsedColumn(),
                TextColumn("eta"),
                TimeRemainingColumn(),
                console=Console(file=self.stream),
                transient=False,
            )
            self._rich.start()
            self._task = self._rich.add_task(self.verb, total=None, records=0, rate="")
        return self

    def update(self, progress: Any) -> None:
        """Show one ``TransferProgress`` (sessions_done, sessions_total, records_done,
        bytes_done, session_id, elapsed)."""
        self._last = progress
        elapsed = max(float(progress.elapsed), 1e-9)
        rate = f"{progress.records_done / elapsed:,.0f} rec/s"
        if self._rich is not None:
            self._rich.update(
                self._task,
                completed=progress.sessions_done,
                total=progress.sessions_total,
                records=f"{progress.records_done:,}",
                rate=rate,
            )
            return
        now = time.monotonic()
        if now - self._last_line >= self.interval:
            self._last_line = now
            self._line(progress, rate)

    def _line(self, progress: Any, rate: str, *, final: bool = False) -> None:
        self._printed = True
        done = progress.sessions_done
        if progress.sessions_total is not None:
            sessions = f"{done}/{progress.sessions_total} sessions"
        elif final:  # the listing is over: the total is what was done
            sessions = f"{done}/{done} sessions"
        else:  # listed lazily: no total yet, and never a "541/?"
            sessions = f"{done} sessions so far"
        print(
            f"{self.verb}: {sessions}, "
            f"{progress.records_done} records, {progress.bytes_done} bytes, {rate}",
            file=self.stream,
            flush=True,
        )

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._rich is not None:
            self._rich.stop()
        elif self._last is not None and kind is None and self._printed:
            elapsed = max(float(self._last.elapsed), 1e-9)
            self._line(self._last, f"{self._last.records_done / elapsed:,.0f} rec/s", final=True)

    @property
    def callback(self) -> Callable[[Any], None]:
        """The function to hand to the transfer API as ``progress=``."""
        return self.update
