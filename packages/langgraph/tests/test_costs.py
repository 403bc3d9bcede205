"""The cost model, counted in store requests (not timed): the latest checkpoint loads in a
bounded number of reads however long the thread; a put is one append; unchanged channel
values are not stored again; list with a limit stops reading early."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.base import empty_checkpoint
from lg_support import build_graph, counting_store

from chatkeep.core import open_store
from chatkeep.langgraph import ChatkeepSaver

pytestmark = pytest.mark.parametrize("backend", ["memory", "sqlite"], indirect=True)


def _chat(saver: ChatkeepSaver, thread: str, turns: int) -> None:
    graph = build_graph(saver)
    config = {"configurable": {"thread_id": thread}}
    for turn in range(turns):
        text = f"weather in Town{turn}" if turn % 3 == 1 else f"message {turn}"
        graph.invoke({"messages": [HumanMessage(text)]}, config)


def _latest_load_cost(url: str, prefix: str, thread: str) -> tuple[int, int, Any]:
    store, counter = counting_store(open_store(url))
    saver = ChatkeepSaver(store=store, prefix=prefix)  # a fresh handle: nothing cached
    found = saver.get_tuple({"configurable": {"thread_id": thread}})
    calls, records = counter.calls["read"], counter.read_records
    store.close()
    return calls, records, found


def test_latest_checkpoint_reads_are_bounded(url: str, prefix: str) -> None:
    with ChatkeepSaver(url=url, prefix=prefix) as saver:
        _chat(saver, "short", 3)
        _chat(saver, "long", 30)
    short = _latest_load_cost(url, prefix, "short")
    long = _latest_load_cost(url, prefix, "long")
    assert long[2] is not None and len(long[2].checkpoint["channel_values"]["messages"]) == 80
    print("latest load (reads, records): short", short[:2], "long", long[:2])
    # The same number of requests and records whatever the thread's length.
    assert long[:2] == short[:2]
    assert long[0] <= 3  # the tail, at most one slice of older values, the pending writes
    assert long[1] <= 8


def test_put_is_one_append_and_unchanged_values_are_not_stored_again(url: str, prefix: str) -> None:
    store, counter = counting_store(open_store(url))
    saver = ChatkeepSaver(store=store, prefix=prefix)
    big = "x" * 50_000
    config = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = {"big": big, "small": 0}
    checkpoint["channel_versions"] = {"big": saver.get_next_version(None), "small": "1"}
    config = saver.put(config, checkpoint, {"step": 0}, dict(checkpoint["channel_versions"]))
    first = counter.appended_bytes
    assert first > 50_000
    for step in range(1, 11):
        counter.reset()
        checkpoint = {
            **empty_checkpoint(),
            "channel_versions": dict(checkpoint["channel_versions"]),
        }
        version = saver.get_next_version(checkpoint["channel_versions"]["small"])
        checkpoint["channel_versions"]["small"] = version
        checkpoint["channel_values"] = {"big": big, "small": step}
        config = saver.put(config, checkpoint, {"step": step}, {"small": version})
        assert counter.calls == {"append": 1}  # no read: the parent's layout is cached
        assert counter.appended_bytes < 2_000  # the big value is referenced, not re-stored
    # A fresh handle continues the thread with one read (its tail) and one append.
    other_store, other = counting_store(open_store(url))
    other_saver = ChatkeepSaver(store=other_store, prefix=prefix)
    latest = other_saver.get_tuple({"configurable": {"thread_id": "t"}})
    assert latest is not None
    assert latest.checkpoint["channel_values"] == {"big": big, "small": 10}
    other.reset()
    checkpoint = {
        **empty_checkpoint(),
        "channel_versions": dict(latest.checkpoint["channel_versions"]),
    }
    checkpoint["channel_values"] = {"big": big, "small": 11}
    checkpoint["channel_versions"]["small"] = version = other_saver.get_next_version(version)
    other_saver.put(latest.config, checkpoint, {"step": 11}, {"small": version})
    assert other.calls == {"append": 1}
    # Every checkpoint still loads its own values.
    values = [
        t.checkpoint["channel_values"]
        for t in other_saver.list({"configurable": {"thread_id": "t"}})
    ]
    assert [v["small"] for v in values] == list(range(11, -1, -1))
    assert all(v["big"] == big for v in values)
    store.close()
    other_store.close()


def test_list_with_limit_stops_early(url: str, prefix: str) -> None:
    with ChatkeepSaver(url=url, prefix=prefix) as saver:
        _chat(saver, "long", 30)
        _chat(saver, "short", 3)
    store, counter = counting_store(open_store(url))
    saver = ChatkeepSaver(store=store, prefix=prefix)
    costs = {}
    for thread in ("short", "long"):
        counter.reset()
        items = list(
            saver.list({"configurable": {"thread_id": thread, "checkpoint_ns": ""}}, limit=2)
        )
        assert len(items) == 2
        costs[thread] = (counter.calls["read"], counter.read_records)
    assert costs["long"] == costs["short"]
    assert costs["long"][1] <= 16
    # Without a limit the whole history is listed.
    assert len(list(saver.list({"configurable": {"thread_id": "long"}}))) > 100
    store.close()


def test_loading_a_recent_checkpoint_by_id_is_cheap(url: str, prefix: str) -> None:
    with ChatkeepSaver(url=url, prefix=prefix) as saver:
        _chat(saver, "long", 30)
        recent = list(saver.list({"configurable": {"thread_id": "long"}}, limit=3))[-1].config
    store, counter = counting_store(open_store(url))
    found = ChatkeepSaver(store=store, prefix=prefix).get_tuple(recent)
    assert found is not None and found.config == recent
    assert counter.calls["read"] <= 4
    store.close()


def test_loading_an_old_checkpoint_by_id_bisects(url: str, prefix: str) -> None:
    with ChatkeepSaver(url=url, prefix=prefix) as saver:
        _chat(saver, "long", 30)
        history = list(saver.list({"configurable": {"thread_id": "long"}}))
        log_length = len(open_store(url).read(saver._engine.layout.thread("long").log("")))
    assert len(history) > 100
    store, counter = counting_store(open_store(url))
    reader = ChatkeepSaver(store=store, prefix=prefix)
    for old in (history[-1], history[-2], history[len(history) // 2]):
        counter.reset()
        found = reader.get_tuple(old.config)
        assert found is not None
        assert found.checkpoint == old.checkpoint and found.metadata == old.metadata
        print("by id:", counter.calls["read"], "reads,", counter.read_records, "records")
        assert counter.calls["read"] <= 16
        assert counter.read_records < log_length // 4
    # An id that is not there is looked for everywhere (and not found).
    missing = {"configurable": {"thread_id": "long", "checkpoint_id": "0" * 8}}
    assert reader.get_tuple(missing) is None
    store.close()
