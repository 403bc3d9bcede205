"""Run the nox sessions tagged ``ci`` in streams side by side and print the budget.

``./run tests`` (without nox options) runs this with the bootstrap Python (which has nox);
``python .ci/streams.py NAME...`` runs only the named ``ci`` sessions the same way.
Each session is one ``nox -s NAME`` process; ``CHATKEEP_CI_STREAMS`` of them (default 2,
one per core of the CI machine) run at a time, taken longest first by the noxfile's
``TIMINGS`` so the longest session never starts last. A session's output is printed whole
when it ends (streams never interleave lines). At the end: each session's time, group and
share of the run, against the 25-minute budget of DESIGN section 12.

The run fails (exit 1) when a session fails, when one is skipped under ``CI=true``, or when
no session ran at all; the pytest sessions themselves fail when no test ran.
"""

from __future__ import annotations

import json
import os
import runpy
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
#: DESIGN section 12: ``./run tests`` under 25 minutes on the 2-core CI machine.
BUDGET_SECONDS = 25 * 60


@dataclass
class Outcome:
    """One session's run."""

    name: str
    group: str
    expected: int | None
    seconds: float = 0.0
    result: str = "not run"
    stream: int = 0


def ci_sessions() -> list[dict[str, Any]]:
    """The sessions ``nox -t ci`` selects, with their tags (``nox -l --json``)."""
    listing = subprocess.run(
        [sys.executable, "-m", "nox", "-t", "ci", "--list", "--json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    sessions: list[dict[str, Any]] = json.loads(listing)
    return sessions


def plan(
    sessions: list[dict[str, Any]], timings: dict[str, int], groups: tuple[str, ...]
) -> list[Outcome]:
    """Sessions longest first (one missing from the table first of all: its time is unknown)."""
    planned = [
        Outcome(
            name=s["session"],
            group=next((tag for tag in s["tags"] if tag in groups), "none"),
            expected=timings.get(s["session"]),
        )
        for s in sessions
    ]
    return sorted(planned, key=lambda o: -(o.expected if o.expected is not None else 10**9))


def run_one(outcome: Outcome, stream: int, print_lock: threading.Lock) -> None:
    """Run one session with its output in a file, then print it whole."""
    outcome.stream = stream
    with tempfile.TemporaryDirectory() as scratch:
        log_path = Path(scratch, "log")
        report_path = Path(scratch, "report.json")
        command = [sys.executable, "-m", "nox", "-s", outcome.name, f"--report={report_path}"]
        start = time.monotonic()
        with open(log_path, "wb") as log:
            code = subprocess.run(
                command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, check=False
            ).returncode
        outcome.seconds = time.monotonic() - start
        try:
            report = json.loads(report_path.read_text())
            outcome.result = report["sessions"][0]["result"]
        except (OSError, ValueError, LookupError):
            outcome.result = "failed"
        if code != 0:
            outcome.result = "failed"
        with print_lock:
            print(f"\n===== {outcome.name}: {outcome.result} in {outcome.seconds:.0f} s "
                  f"(stream {stream}) =====", flush=True)  # fmt: skip
            sys.stdout.write(log_path.read_text(errors="replace"))
            sys.stdout.flush()


def run_streams(outcomes: list[Outcome], streams: int) -> None:
    """Run ``outcomes`` in order, ``streams`` at a time."""
    pending = list(outcomes)
    queue_lock = threading.Lock()
    print_lock = threading.Lock()

    def worker(stream: int) -> None:
        while True:
            with queue_lock:
                if not pending:
                    return
                outcome = pending.pop(0)
            run_one(outcome, stream, print_lock)

    threads = [threading.Thread(target=worker, args=(n + 1,)) for n in range(streams)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def budget(outcomes: list[Outcome], wall: float, streams: int) -> str:
    """The table printed at the end of a run."""
    total = sum(o.seconds for o in outcomes) or 1.0
    width = max(len(o.name) for o in outcomes)
    lines = [
        "",
        f"CI budget: {wall / 60:.1f} min wall of {BUDGET_SECONDS // 60} min "
        f"({wall / BUDGET_SECONDS:.0%}), {streams} streams, {total / 60:.1f} min of sessions",
        f"{'session':<{width}}  {'group':<9}  {'seconds':>7}  {'share':>6}  {'table':>5}  result",
    ]
    for o in sorted(outcomes, key=lambda o: -o.seconds):
        table = "-" if o.expected is None else str(o.expected)
        lines.append(
            f"{o.name:<{width}}  {o.group:<9}  {o.seconds:>7.0f}  {o.seconds / total:>6.1%}  "
            f"{table:>5}  {o.result}"
        )
    if wall > BUDGET_SECONDS:
        lines.append(f"OVER BUDGET: {wall / 60:.1f} min > {BUDGET_SECONDS // 60} min")
    return "\n".join(lines)


def main() -> int:
    """Run every ``ci`` session; 0 only when all of them ran and passed."""
    noxfile = runpy.run_path(str(ROOT / "noxfile.py"))
    sessions = ci_sessions()
    if sys.argv[1:]:  # `python .ci/streams.py NAME...`: only these ci sessions
        sessions = [s for s in sessions if s["session"] in sys.argv[1:]]
    outcomes = plan(sessions, noxfile["TIMINGS"], noxfile["GROUPS"])
    if not outcomes:
        print("no nox session is tagged ci: nothing ran", file=sys.stderr)
        return 1
    streams = max(1, int(os.environ.get("CHATKEEP_CI_STREAMS", "2")))
    start = time.monotonic()
    run_streams(outcomes, streams)
    wall = time.monotonic() - start
    print(budget(outcomes, wall, streams), flush=True)
    in_ci = os.environ.get("CI", "").lower() in ("1", "true", "yes")
    bad = [o for o in outcomes if o.result != "success" and (in_ci or o.result != "skipped")]
    for o in bad:
        print(f"FAILED: {o.name} ({o.result})", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
