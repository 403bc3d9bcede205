"""Two writers on one thread at once never lose a checkpoint or a pending write: with
conditional appends (retried on conflict) and without them (append-only records)."""

from __future__ import annotations

import itertools
import multiprocessing
import sys
import threading
import uuid
from typing import Any

import pytest
from lg_support import hammer, hammer_in_process

from chatkeep.langgraph import ChatkeepSaver

COUNT = 40


def _check(url: str, prefix: str, thread_id: str, acknowledged: list[list[str]]) -> None:
    with ChatkeepSaver(url=url, prefix=prefix) as saver:
        listed = list(saver.list({"configurable": {"thread_id": thread_id}}))
    by_id = {t.checkpoint["id"]: t for t in listed}
    order = [t.metadata["worker"] for t in listed]
    switches = sum(a != b for a, b in itertools.pairwise(order))
    print(f"log order switches between writers: {switches}")
    assert len(listed) == len(by_id) == 2 * COUNT
    for worker, ids in enumerate(acknowledged):
        assert len(ids) == COUNT
        for step, checkpoint_id in enumerate(ids):
            found = by_id[checkpoint_id]
            assert found.metadata["worker"] == worker and found.metadata["step"] == step
            assert found.checkpoint["channel_values"] == {f"w{worker}": step}
            assert [(w[1], w[2]) for w in found.pending_writes or []] == [
                ("note", f"{worker}:{step}")
            ]
            if step:
                assert found.parent_config is not None
                assert found.parent_config["configurable"]["checkpoint_id"] == ids[step - 1]


@pytest.mark.parametrize("hide_conditional", [False, True], ids=["declared", "hidden"])
@pytest.mark.parametrize("backend", ["memory"], indirect=True)
def test_two_threads_one_thread_id(url: str, prefix: str, hide_conditional: bool) -> None:
    thread_id = f"race-{uuid.uuid4().hex[:8]}"
    results: list[list[str]] = [[], []]
    barrier = threading.Barrier(2)

    def work(worker: int) -> None:
        results[worker] = hammer(
            url, prefix, thread_id, worker, COUNT, hide_conditional, barrier.wait
        )

    workers = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads often, so the two writers interleave
    try:
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(120)
    finally:
        sys.setswitchinterval(interval)
    _check(url, prefix, thread_id, results)


@pytest.mark.parametrize("hide_conditional", [False, True], ids=["declared", "hidden"])
@pytest.mark.parametrize("backend", ["sqlite", "postgres", "redis"], indirect=True)
def test_two_processes_one_thread(url: str, prefix: str, hide_conditional: bool) -> None:
    thread_id = f"race-{uuid.uuid4().hex[:8]}"
    context = multiprocessing.get_context("spawn")
    queue: Any = context.Queue()
    start = context.Event()
    processes = [
        context.Process(
            target=hammer_in_process,
            args=(queue, start, url, prefix, thread_id, worker, COUNT, hide_conditional),
        )
        for worker in range(2)
    ]
    for process in processes:
        process.start()
    assert [queue.get(timeout=120)[0] for _ in processes] == ["ready", "ready"]
    start.set()
    outcomes = [queue.get(timeout=120) for _ in processes]
    for process in processes:
        process.join(30)
    errors = [detail for kind, detail in outcomes if kind == "error"]
    assert not errors, errors
    results = sorted((ids for _kind, ids in outcomes), key=lambda ids: ids[0])
    # Which worker is which: by the worker number in the first checkpoint's metadata.
    with ChatkeepSaver(url=url, prefix=prefix) as saver:
        first = saver.get_tuple(
            {"configurable": {"thread_id": thread_id, "checkpoint_id": results[0][0]}}
        )
    assert first is not None
    if first.metadata["worker"] == 1:
        results.reverse()
    _check(url, prefix, thread_id, results)
