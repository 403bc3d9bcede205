"""Running writers against a store and checking what it kept."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from chatkeep.core import open_store

__all__ = ["Outcome", "Workload", "run_writers"]

WRITER = Path(__file__).with_name("writer.py")


@dataclass(frozen=True)
class Workload:
    """How much the writers do (sizes bounded for CI; scale with CHATKEEP_RELIABILITY_SCALE)."""

    processes: int = 4
    threads: int = 4
    batches: int = 25
    size: int = 3
    resend: float = 0.1

    def scaled(self, factor: float) -> Workload:
        """The same shape with ``factor`` times the batches."""
        return Workload(
            self.processes, self.threads, max(1, int(self.batches * factor)), self.size, self.resend
        )


@dataclass
class Outcome:
    """What the writers were told and what the store holds."""

    acknowledged_batches: int = 0
    acknowledged_records: int = 0
    resends: int = 0
    stored_records: int = 0
    lost: int = 0
    duplicated: int = 0
    misordered: int = 0
    torn_batches: int = 0
    gave_up: int = 0
    errors: Counter[str] = field(default_factory=Counter)
    untyped_errors: Counter[str] = field(default_factory=Counter)
    faults: Counter[str] = field(default_factory=Counter)

    def summary(self, name: str) -> str:
        """One line of figures."""
        errors = ", ".join(f"{k} x{v}" for k, v in self.errors.most_common()) or "none"
        faults = ", ".join(f"{k} x{v}" for k, v in self.faults.most_common()) or "none"
        return (
            f"{name}: {self.acknowledged_batches} batches / {self.acknowledged_records} records "
            f"acknowledged, {self.resends} exact re-sends, {self.stored_records} stored; "
            f"lost {self.lost}, duplicated {self.duplicated}, misordered {self.misordered}, "
            f"torn {self.torn_batches}, gave up {self.gave_up}; faults: {faults}; "
            f"errors raised (all typed unless listed as untyped): {errors}"
            + (f"; UNTYPED: {dict(self.untyped_errors)}" if self.untyped_errors else "")
        )


def run_writers(
    url: str,
    session: str,
    workload: Workload,
    workdir: Path,
    *,
    during: Callable[[threading.Event], None] | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 900,
    hold: bool = False,
) -> Outcome:
    """Start ``workload.processes`` writer processes on ``url``; call ``during(finished)``
    in a thread while they run (to restart servers, cut connections; ``finished`` is set
    once every writer has exited); then read the session back and check it against what
    the writers were told. With ``hold``, the writers keep appending until ``during`` has
    returned (so every fault it injects lands while they run)."""
    until = workdir / "writers-may-stop"
    env = {**(env if env is not None else os.environ)}
    if hold and during is not None:
        env["CHATKEEP_WRITER_UNTIL"] = str(until)
    else:
        env.pop("CHATKEEP_WRITER_UNTIL", None)
    journals = [workdir / f"writer-{n}.jsonl" for n in range(workload.processes)]
    processes = [
        subprocess.Popen(
            [
                sys.executable,
                str(WRITER),
                url,
                session,
                str(n),
                str(workload.threads),
                str(workload.batches),
                str(workload.size),
                str(workload.resend),
                str(journal),
            ],
            env=env,
        )
        for n, journal in enumerate(journals)
    ]
    finished = threading.Event()
    failures: list[BaseException] = []

    def disturb() -> None:
        assert during is not None
        try:
            during(finished)
        except BaseException as error:  # reported after the writers are done
            failures.append(error)
        finally:
            until.touch()

    disturber = threading.Thread(target=disturb, daemon=True)
    if during is not None:
        disturber.start()
    try:
        for process in processes:
            if process.wait(timeout) != 0:
                raise RuntimeError(f"a writer exited with {process.returncode}")
    finally:
        finished.set()
        if during is not None:
            disturber.join(timeout)
    if failures:
        raise failures[0]
    return check(url, session, journals, workload)


def check(url: str, session: str, journals: list[Path], workload: Workload) -> Outcome:
    """Compare the session's records with every writer's journal."""
    outcome = Outcome()
    acknowledged: dict[tuple[int, int], list[list[str]]] = {}  # (writer, thread) -> batches
    for writer, journal in enumerate(journals):
        for line in journal.read_text().splitlines():
            event = json.loads(line)
            kind = event["event"]
            if kind == "ack":
                acknowledged.setdefault((writer, event["thread"]), []).append(event["ids"])
                outcome.acknowledged_batches += 1
                outcome.acknowledged_records += len(event["ids"])
            elif kind == "resend":
                outcome.resends += 1
            elif kind == "gave_up":
                outcome.gave_up += 1
            elif kind == "error":
                outcome.errors[event["type"]] += 1
                if not event["typed"]:
                    outcome.untyped_errors[event["type"]] += 1
    with open_store(url) as store:
        stored = [record.id for record in store.read(session)]
    outcome.stored_records = len(stored)
    counts = Counter(stored)
    outcome.duplicated = sum(count - 1 for count in counts.values() if count > 1)
    position = {record_id: index for index, record_id in enumerate(stored)}
    # Every batch in the store, acknowledged or not, is whole and in order (a failed append
    # that landed anyway must have landed completely).
    by_batch: dict[str, list[int]] = {}
    for index, record_id in enumerate(stored):
        by_batch.setdefault(record_id.rsplit("-r", 1)[0], []).append(index)
    for places in by_batch.values():
        if len(places) != workload.size or places[-1] - places[0] != workload.size - 1:
            outcome.torn_batches += 1
    for batches in acknowledged.values():
        previous_end = -1
        for ids in batches:
            found = [position[record_id] for record_id in ids if record_id in position]
            outcome.lost += len(ids) - len(found)
            if len(found) != len(ids):
                continue
            if found != sorted(found):
                outcome.torn_batches += 1
            if found[0] <= previous_end:  # a thread's batches in the order acknowledged
                outcome.misordered += 1
            previous_end = found[-1]
    return outcome
