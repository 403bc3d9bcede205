"""The saver's own behaviour beyond LangGraph's suite: bad input, missing capabilities,
damaged records, crash recovery of rewrites, hostile ids, listing every thread."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langgraph.checkpoint.base import empty_checkpoint
from lg_support import counting_store

from chatkeep.core import Record, Store, open_store
from chatkeep.core.errors import CapabilityMissing, CorruptRecord, InvalidOption
from chatkeep.langgraph import ChatkeepSaver, InvalidConfig
from chatkeep.langgraph.layout import Layout

pytestmark = pytest.mark.parametrize("backend", ["memory", "sqlite"], indirect=True)


def _put(
    saver: ChatkeepSaver,
    thread: str,
    values: dict[str, Any],
    parent: dict[str, Any] | None = None,
    ns: str = "",
    **metadata: Any,
) -> dict[str, Any]:
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = dict(values)
    checkpoint["channel_versions"] = {k: saver.get_next_version(None) for k in values}
    config: dict[str, Any] = {"configurable": {"thread_id": thread, "checkpoint_ns": ns}}
    if parent is not None:
        config["configurable"]["checkpoint_id"] = parent["configurable"]["checkpoint_id"]
    return saver.put(config, checkpoint, {"step": 0, **metadata}, checkpoint["channel_versions"])


def test_bad_input_raises_typed_errors(open_saver: Any, url: str) -> None:
    saver = open_saver()
    with pytest.raises(InvalidConfig, match="thread_id"):
        saver.get_tuple({"configurable": {}})
    with pytest.raises(InvalidConfig, match="checkpoint_id"):
        saver.put_writes({"configurable": {"thread_id": "t"}}, [("a", 1)], "task")
    with pytest.raises(InvalidOption, match="strategy"):
        saver.prune(["t"], strategy="keep_some")
    for bad in ("", "no-colon", "a/b:", "x" * 70 + ":"):
        with pytest.raises(InvalidOption, match="prefix"):
            ChatkeepSaver(url=url, prefix=bad)
    with pytest.raises(TypeError, match="not both"):
        ChatkeepSaver(url=url, store=open_store("memory://"))


def test_threads_stay_apart_whatever_their_ids(open_saver: Any) -> None:
    saver = open_saver()
    ids = ["a/b", "a%2Fb", "a", "a/", "../x", "x" * 1000, "Ada 🧪", "a:b", "1"]
    for thread in ids:
        _put(saver, thread, {"who": thread})
        _put(saver, thread, {"who": thread}, ns=f"child:{thread}")
    for thread in ids:
        for ns in ("", f"child:{thread}"):
            found = saver.get_tuple({"configurable": {"thread_id": thread, "checkpoint_ns": ns}})
            assert found is not None
            assert found.checkpoint["channel_values"] == {"who": thread}
            assert found.config["configurable"]["thread_id"] == thread
    saver.delete_thread("a")
    assert saver.get_tuple({"configurable": {"thread_id": "a"}}) is None
    assert saver.get_tuple({"configurable": {"thread_id": "a/b"}}) is not None
    assert saver.get_tuple({"configurable": {"thread_id": "a%2Fb"}}) is not None
    # Every thread is listed, each namespace of a thread when none is named.
    everything = list(saver.list(None))
    assert sorted({t.config["configurable"]["thread_id"] for t in everything}) == sorted(
        set(ids) - {"a"}
    )
    assert len(list(saver.list({"configurable": {"thread_id": "a/b"}}))) == 2
    assert len(list(saver.list(None, filter={"source": "nothing"}))) == 0


@pytest.mark.parametrize("other", ["right:", "left:x:", "left:left:"])
def test_savers_with_other_prefixes_do_not_meet(open_saver: Any, other: str) -> None:
    left, right = open_saver(prefix="left:"), open_saver(prefix=other)
    _put(left, "t", {"side": "left"}, run_id="run-1")
    _put(right, "t", {"side": "right"}, run_id="run-1")
    right.delete_for_runs(["run-1"])
    found = left.get_tuple({"configurable": {"thread_id": "t"}})
    assert found is not None and found.checkpoint["channel_values"] == {"side": "left"}
    assert right.get_tuple({"configurable": {"thread_id": "t"}}) is None
    assert [t.checkpoint["channel_values"] for t in left.list(None)] == [{"side": "left"}]
    _put(right, "u", {"side": "right"})
    left.delete_for_runs(["run-1"])
    assert [t.config["configurable"]["thread_id"] for t in right.list(None)] == ["u"]


def test_first_regular_write_is_kept_special_writes_replace(open_saver: Any) -> None:
    saver = open_saver()
    config = _put(saver, "t", {})
    saver.put_writes(config, [("ch", "first")], "task-1")
    saver.put_writes(config, [("ch", "second")], "task-1")  # same task and index
    saver.put_writes(config, [("__error__", "boom")], "task-2")
    saver.put_writes(config, [("__error__", "boom again")], "task-2")
    found = saver.get_tuple(config)
    assert found is not None
    assert sorted((w[0], w[1], w[2]) for w in found.pending_writes or []) == [
        ("task-1", "ch", "first"),
        ("task-2", "__error__", "boom again"),
    ]


def test_missing_capabilities_are_named(url: str, prefix: str) -> None:
    inner = open_store(url)
    store, _counter = counting_store(inner, frozenset({"delete", "list_sessions"}))
    saver = ChatkeepSaver(store=store, prefix=prefix)
    config = _put(saver, "t", {"a": 1})
    assert saver.get_tuple(config) is not None
    with pytest.raises(CapabilityMissing, match="delete"):
        saver.delete_thread("t")
    with pytest.raises(CapabilityMissing, match="delete"):
        saver.prune(["t"])
    with pytest.raises(CapabilityMissing, match="list_sessions"):
        list(saver.list(None))
    saver.copy_thread("t", "u")  # needs nothing optional
    assert saver.get_tuple({"configurable": {"thread_id": "u"}}) is not None
    inner.close()


def test_delete_without_listing_uses_the_thread_index(url: str, prefix: str) -> None:
    inner = open_store(url)
    store, _counter = counting_store(inner, frozenset({"list_sessions"}))
    saver = ChatkeepSaver(store=store, prefix=prefix)
    root = _put(saver, "t", {"a": 1})
    child = _put(saver, "t", {"b": 2}, ns="sub:1")
    saver.put_writes(root, [("x", 1)], "task")
    saver.put_writes(child, [("y", 2)], "task")
    saver.delete_thread("t")
    left = [s for s in inner.list_sessions(prefix) if inner.read(s)]
    assert left == []
    inner.close()


def test_damaged_records_are_reported(url: str, prefix: str, store: Store) -> None:
    saver = ChatkeepSaver(store=store, prefix=prefix)
    config = _put(saver, "t", {"a": 1})
    log = Layout(prefix).thread("t").log("")
    store.append(log, [Record("garbage", b"\xc1 not msgpack")])
    with pytest.raises(CorruptRecord) as caught:
        ChatkeepSaver(store=store, prefix=prefix).get_tuple({"configurable": {"thread_id": "t"}})
    assert caught.value.session_id == log and caught.value.record_id == "garbage"
    # The checkpoint before the damage is still readable by id.
    assert saver.get_tuple(config) is not None


def test_a_rewrite_cut_short_is_completed_by_the_next_reader(url: str, prefix: str) -> None:
    inner = open_store(url)
    saver = ChatkeepSaver(store=inner, prefix=prefix)
    first = _put(saver, "t", {"a": 1})
    second = _put(saver, "t", {"a": 2}, parent=first)
    saver.put_writes(second, [("x", "kept")], "task")

    class Crash(Exception):
        pass

    class CrashOnLogAppend:
        """Lets prune stage its rewrite and erase the log, then dies."""

        capabilities = inner.capabilities

        def __init__(self) -> None:
            self.deleted_log = False

        def read(self, *args: Any) -> Any:
            return inner.read(*args)

        def append(self, session_id: str, records: Any) -> None:
            if self.deleted_log and "/c/" in session_id:
                raise Crash
            inner.append(session_id, records)

        def append_if(self, session_id: str, records: Any, after: str | None) -> None:
            inner.append_if(session_id, records, after=after)

        def delete(self, session_id: str) -> None:
            inner.delete(session_id)
            self.deleted_log = self.deleted_log or "/c/" in session_id

        def list_sessions(self, prefix: str | None = None) -> Any:
            return inner.list_sessions(prefix)

    crashing = ChatkeepSaver(store=Store(CrashOnLogAppend()), prefix=prefix)
    with pytest.raises(Crash):
        crashing.prune(["t"])
    log = Layout(prefix).thread("t").log("")
    assert inner.read(log) == []  # the log is gone, its replacement staged
    fresh = ChatkeepSaver(store=inner, prefix=prefix)
    latest = fresh.get_tuple({"configurable": {"thread_id": "t"}})
    assert latest is not None
    assert latest.checkpoint["channel_values"] == {"a": 2}
    assert [(w[1], w[2]) for w in latest.pending_writes or []] == [("x", "kept")]
    assert len(list(fresh.list({"configurable": {"thread_id": "t"}}))) == 1
    assert inner.read(Layout(prefix).thread("t").rewrite("")) == []
    inner.close()


def test_prune_keeps_the_latest_self_contained(open_saver: Any) -> None:
    saver = open_saver()
    config = _put(saver, "t", {"big": "x" * 1000, "small": 0})
    checkpoint = empty_checkpoint()
    for step in range(1, 5):
        tuple_ = saver.get_tuple(config)
        assert tuple_ is not None
        checkpoint = empty_checkpoint()
        checkpoint["channel_versions"] = dict(tuple_.checkpoint["channel_versions"])
        version = saver.get_next_version(checkpoint["channel_versions"]["small"])
        checkpoint["channel_versions"]["small"] = version
        checkpoint["channel_values"] = {"big": "x" * 1000, "small": step}
        config = saver.put(config, checkpoint, {"step": step}, {"small": version})
    saver.prune(["t"])
    listed = list(saver.list({"configurable": {"thread_id": "t"}}))
    assert [t.checkpoint["channel_values"] for t in listed] == [{"big": "x" * 1000, "small": 4}]
    # The thread goes on after pruning.
    tuple_ = listed[0]
    checkpoint = empty_checkpoint()
    checkpoint["channel_versions"] = dict(tuple_.checkpoint["channel_versions"])
    checkpoint["channel_versions"]["small"] = version = saver.get_next_version(version)
    checkpoint["channel_values"] = {"big": "x" * 1000, "small": 5}
    saver.put(tuple_.config, checkpoint, {"step": 5}, {"small": version})
    other = ChatkeepSaver(store=saver.store, prefix=saver._engine.layout.prefix)
    latest = other.get_tuple({"configurable": {"thread_id": "t"}})
    assert latest is not None and latest.checkpoint["channel_values"]["small"] == 5
    assert latest.checkpoint["channel_values"]["big"] == "x" * 1000


def test_async_and_sync_see_the_same_data(open_saver: Any) -> None:
    saver = open_saver()

    async def main() -> None:
        checkpoint = empty_checkpoint()
        checkpoint["channel_values"] = {"a": [1, 2, 3]}
        checkpoint["channel_versions"] = {"a": saver.get_next_version(None)}
        config = await saver.aput(
            {"configurable": {"thread_id": "t", "checkpoint_ns": ""}},
            checkpoint,
            {"step": 0},
            checkpoint["channel_versions"],
        )
        await saver.aput_writes(config, [("a", 4)], "task")
        listed = [t async for t in saver.alist(None)]
        assert listed[0].pending_writes == [("task", "a", 4)]

    asyncio.run(main())
    found = saver.get_tuple({"configurable": {"thread_id": "t"}})
    assert found is not None and found.checkpoint["channel_values"] == {"a": [1, 2, 3]}
    assert "memory" in repr(saver) or "sqlite" in repr(saver)
