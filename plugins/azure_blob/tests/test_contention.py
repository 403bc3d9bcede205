"""Real contention on Azurite: threads in four processes append to one session at once.

Azurite applies each conditional Append Block atomically, like the service, so this is
the race the algorithm is built for: every record must survive exactly once, each batch
contiguous, each writer's batches in order, with segments rolling in the middle of it.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

from chatkeep.core import Record, Store, open_store

pytestmark = pytest.mark.usefixtures("blob_service")

PROCESSES = 4
THREADS = 4
BATCHES = 10
PER_BATCH = 3

# A worker process: THREADS threads, each appending BATCHES batches through one store.
WORKER = """
import sys, threading
from azure.core.pipeline.transport import RequestsTransport
from chatkeep.core import Record, open_store
url, name, threads, batches, per_batch = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:6])
conflicts = []
class Counting(RequestsTransport):
    def send(self, request, **kwargs):
        response = super().send(request, **kwargs)
        if response.status_code == 412:
            conflicts.append(1)
        return response
store = open_store(url, transport=Counting())
barrier = threading.Barrier(threads)
errors = []
def run(writer):
    try:
        barrier.wait(60)
        for b in range(batches):
            store.append("shared", [Record(f"{writer}.{b:03d}.{n}", f"{writer}/{b}/{n}".encode())
                                    for n in range(per_batch)])
    except BaseException as exc:
        errors.append(repr(exc))
workers = [threading.Thread(target=run, args=(f"{name}t{t}",)) for t in range(threads)]
for w in workers: w.start()
for w in workers: w.join()
store.close()
print(len(conflicts))
if errors:
    print("\\n".join(errors), file=sys.stderr)
    sys.exit(1)
"""


def planned(writer: str) -> list[list[str]]:
    return [[f"{writer}.{b:03d}.{n}" for n in range(PER_BATCH)] for b in range(BATCHES)]


def check(log: list[Record], writers: list[str]) -> None:
    counts = Counter(record.id for record in log)
    duplicated = [rid for rid, count in counts.items() if count > 1]
    assert not duplicated, f"stored twice: {duplicated[:5]}"
    expected = {rid for writer in writers for ids in planned(writer) for rid in ids}
    assert set(counts) == expected, f"lost: {sorted(expected - set(counts))[:5]}"
    position = {record.id: index for index, record in enumerate(log)}
    for writer in writers:
        batches = planned(writer)
        starts = [position[ids[0]] for ids in batches]
        assert starts == sorted(starts), f"{writer}'s batches are out of order"
        for ids in batches:
            first = position[ids[0]]
            assert [position[rid] for rid in ids] == list(range(first, first + PER_BATCH))
    for record in log:
        writer, batch, n = record.id.rsplit(".", 2)
        assert record.data == f"{writer}/{int(batch)}/{n}".encode()


@pytest.mark.slow
def test_threads_in_four_processes_append_to_one_session(
    blob_service: Any, open_azure: Callable[..., Store]
) -> None:
    url = blob_service.url(segment_blocks=40)
    arguments = [str(THREADS), str(BATCHES), str(PER_BATCH)]
    children = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, url, f"p{p}", *arguments],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for p in range(PROCESSES)
    ]
    # This process reads while they write: every read must be whole batches.
    reader = open_store(url)
    torn: list[str] = []
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            tail = reader.read("shared", -PER_BATCH * 2)
            if tail and not tail[-1].id.endswith(f".{PER_BATCH - 1}"):
                torn.append(tail[-1].id)

    watcher = threading.Thread(target=watch)
    watcher.start()
    conflicts = 0
    try:
        for child in children:
            output, errors = child.communicate(timeout=600)
            assert child.returncode == 0, errors[-2000:]
            conflicts += int(output.split()[-1])
    finally:
        done.set()
        watcher.join(60)
        reader.close()
    assert not torn, f"a tail read ended inside a batch: {torn[:3]}"
    assert conflicts > 0, "the writers never raced: the test proves nothing"
    writers = [f"p{p}t{t}" for p in range(PROCESSES) for t in range(THREADS)]
    cold = open_store(url)
    try:
        log = cold.read("shared")
        check(log, writers)
        assert len(log) == PROCESSES * THREADS * BATCHES * PER_BATCH
        assert cold.read("shared", -25) == log[-25:]
        assert cold.read("shared", 100, 161) == log[100:161]
        segments = [name for name in _names(blob_service, url) if name.rsplit("/", 1)[1].isdigit()]
        assert len(segments) >= 4, "the test should have rolled segments under contention"
    finally:
        cold.close()


def _names(blob_service: Any, url: str) -> list[str]:
    store = open_store(url)
    client = store.backend._settings.sync_container()  # type: ignore[attr-defined]
    try:
        return list(client.list_blob_names(name_starts_with=store.backend._settings.root))  # type: ignore[attr-defined]
    finally:
        client.close()
        store.close()


def test_threads_of_one_handle_append_to_one_session(open_azure: Callable[..., Store]) -> None:
    store = open_azure(segment_blocks=25)
    writers = [f"t{t}" for t in range(8)]
    barrier = threading.Barrier(len(writers))
    errors: list[BaseException] = []

    def run(writer: str) -> None:
        try:
            barrier.wait(30)
            for number, ids in enumerate(planned(writer)):
                batch = [
                    Record(rid, f"{writer}/{number}/{n}".encode()) for n, rid in enumerate(ids)
                ]
                store.append("shared", batch)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(writer,)) for writer in writers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(300)
    assert not errors, errors[0]
    check(store.read("shared"), writers)
