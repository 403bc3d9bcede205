"""Deleting sessions that have forks: cascade, self-contained forks, and crash safety."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, ClassVar

import pytest

from chatkeep.core import (
    CapabilityMissing,
    Message,
    Record,
    Store,
    ViewError,
    delete_session,
    encode_records,
    fork,
    list_forks,
    new_id,
    read_view,
    undo,
)
from chatkeep.core.memory import MemoryStore
from chatkeep.core.views import TEMP_PREFIX, adelete_session, alist_forks, compact
from chatkeep.core.views._control import FORK, Control, parse_entry

MakeStore = Callable[..., tuple[Store, Any]]


def add_turn(store: Store, session: str, text: str) -> list[Message]:
    messages = [
        Message.user(text, message_id=new_id()),
        Message.assistant("re: " + text, message_id=new_id()),
    ]
    store.append(session, encode_records(messages))
    return messages


def texts(messages: list[Message]) -> list[str]:
    return [m.text for m in messages]


def first_kind(store: Store, session: str) -> str | None:
    records = store.read(session, 0, 1)
    if not records:
        return None
    entry = parse_entry(records[0].data)
    return entry.kind if isinstance(entry, Control) else "message"


def family(store: Store) -> dict[str, str]:
    """root -> child -> grandchild, plus a sibling forked at a message; returns the ids."""
    turns = [add_turn(store, "root", f"r{i}") for i in range(4)]
    child = fork(store, "root")
    add_turn(store, child, "c")
    grandchild = fork(store, child)
    add_turn(store, grandchild, "g")
    sibling = fork(store, "root", at=turns[1][1].message_id)
    add_turn(store, sibling, "s")
    add_turn(store, "root", "r-late")
    return {"child": child, "grandchild": grandchild, "sibling": sibling}


def test_cascade_deletes_forks_and_forks_of_forks(counting_store: MakeStore) -> None:
    store, _ = counting_store()
    ids = family(store)
    add_turn(store, "bystander", "b")
    delete_session(store, "root", cascade=True)
    for name in ["root", *ids.values()]:
        assert store.read(name) == [], name
    assert texts(read_view(store, "bystander")) == ["b", "re: b"]


def test_default_makes_forks_self_contained(counting_store: MakeStore) -> None:
    store, _ = counting_store()
    ids = family(store)
    before = {name: read_view(store, name) for name in ids.values()}
    assert sorted(list_forks(store, "root")) == sorted([ids["child"], ids["sibling"]])
    delete_session(store, "root")
    assert store.read("root") == []
    for name, view in before.items():
        assert read_view(store, name) == view, name
    assert first_kind(store, ids["child"]) == "chatkeep.base"
    assert first_kind(store, ids["sibling"]) == "chatkeep.base"
    # The grandchild still reads through its (rewritten) parent, positions shifted.
    assert first_kind(store, ids["grandchild"]) == FORK
    assert read_view(store, ids["grandchild"], limit=3) == before[ids["grandchild"]][-3:]
    assert not [s for s in store.list_sessions() if s.startswith(TEMP_PREFIX)]
    # Life goes on in a self-contained fork: appends, undo, forks, delete.
    add_turn(store, ids["child"], "c2")
    assert texts(undo(store, ids["child"])) == ["c2", "re: c2"]
    assert read_view(store, ids["child"]) == before[ids["child"]]
    assert list_forks(store, ids["child"]) == [ids["grandchild"]]
    delete_session(store, ids["child"])
    assert read_view(store, ids["grandchild"]) == before[ids["grandchild"]]
    assert first_kind(store, ids["grandchild"]) == "chatkeep.base"


def test_deleting_the_middle_of_a_chain_copies_only_into_its_forks(
    counting_store: MakeStore,
) -> None:
    store, _ = counting_store()
    ids = family(store)
    root_view = read_view(store, "root")
    grandchild_view = read_view(store, ids["grandchild"])
    delete_session(store, ids["child"])
    assert store.read(ids["child"]) == []
    assert read_view(store, ids["grandchild"]) == grandchild_view
    assert read_view(store, "root") == root_view
    # Now deleting the root does not touch the grandchild (it no longer reads from root).
    delete_session(store, "root")
    assert read_view(store, ids["grandchild"]) == grandchild_view


def test_a_fork_of_a_rebuilt_session_is_itself_rebuilt_through_the_shift(
    counting_store: MakeStore,
) -> None:
    store, _ = counting_store()
    ids = family(store)
    views = {name: read_view(store, name) for name in ids.values()}
    delete_session(store, "root")  # child rebuilt, grandchild reads it through the shift
    delete_session(store, ids["child"])  # grandchild rebuilt from the shifted positions
    assert read_view(store, ids["grandchild"]) == views[ids["grandchild"]]
    assert read_view(store, ids["sibling"]) == views[ids["sibling"]]


def test_checkpoints_in_a_copied_prefix_still_apply(counting_store: MakeStore) -> None:
    store, _ = counting_store()
    for i in range(5):
        add_turn(store, "root", f"r{i}")
    child = fork(store, "root")
    compact(store, child, lambda view: [Message.system("summary", message_id=new_id())])
    add_turn(store, child, "after")
    view = read_view(store, child)
    assert texts(view) == ["summary", "after", "re: after"]
    delete_session(store, "root")
    assert read_view(store, child) == view


def test_list_forks_ignores_deleted_forks(counting_store: MakeStore) -> None:
    store, _ = counting_store()
    add_turn(store, "root", "r")
    gone, kept = fork(store, "root"), fork(store, "root")
    store.delete(gone)
    assert list_forks(store, "root") == [kept]


def test_delete_needs_the_delete_capability() -> None:
    class NoDelete:
        capabilities: ClassVar[frozenset[str]] = frozenset()

        def __init__(self) -> None:
            self.inner = MemoryStore()

        def append(self, session_id: str, records: list[Record]) -> None:
            self.inner.append(session_id, records)

        def read(self, session_id: str, start: int = 0, stop: int | None = None) -> list[Record]:
            return self.inner.read(session_id, start, stop)

    store = Store(NoDelete())
    add_turn(store, "root", "r")
    fork(store, "root")
    before = store.read("root")
    with pytest.raises(CapabilityMissing):
        delete_session(store, "root")
    assert store.read("root") == before


def test_a_record_id_shared_by_fork_and_parent_refuses_before_changing_anything(
    counting_store: MakeStore,
) -> None:
    store, _ = counting_store()
    shared = add_turn(store, "root", "r")
    child = fork(store, "root")
    store.append(child, encode_records(shared))  # the same ids again, in the fork
    before = {name: store.read(name) for name in ("root", child)}
    with pytest.raises(ViewError, match="cascade=True"):
        delete_session(store, "root")
    assert {name: store.read(name) for name in ("root", child)} == before


def test_async_delete_and_list(counting_store: MakeStore) -> None:
    import asyncio

    store, _ = counting_store()
    ids = family(store)
    view = read_view(store, ids["child"])

    async def scenario() -> None:
        assert ids["child"] in await alist_forks(store, "root")
        await adelete_session(store, "root")

    asyncio.run(scenario())
    assert read_view(store, ids["child"]) == view


# -- crash safety ----------------------------------------------------------------------------


class Injected(RuntimeError):
    """The failure a test injects."""


class FlakyBackend:
    """A memory backend whose N-th call (of any kind) raises, once."""

    capabilities: ClassVar[frozenset[str]] = MemoryStore.capabilities - {"recent"}

    def __init__(self) -> None:
        self.inner = MemoryStore()
        self.calls = 0
        self.fail_at: int | None = None
        self.lost_appends = False  # a failed append that nevertheless landed

    def _tick(self) -> bool:
        self.calls += 1
        if self.fail_at is not None and self.calls == self.fail_at:
            self.fail_at = None
            return True
        return False

    def append(self, session_id: str, records: list[Record]) -> None:
        if self._tick():
            if self.lost_appends:  # the write landed, the answer was lost
                self.inner.append(session_id, records)
            raise Injected("append")
        self.inner.append(session_id, records)

    def append_if(self, session_id: str, records: list[Record], after: str | None) -> None:
        if self._tick():
            if self.lost_appends:
                self.inner.append_if(session_id, records, after)
            raise Injected("append_if")
        self.inner.append_if(session_id, records, after)

    def read(self, session_id: str, start: int = 0, stop: int | None = None) -> list[Record]:
        if self._tick():
            raise Injected("read")
        return self.inner.read(session_id, start, stop)

    def delete(self, session_id: str) -> None:
        if self._tick():
            raise Injected("delete")
        self.inner.delete(session_id)

    def list_sessions(self, prefix: str | None = None) -> Iterator[str]:
        return self.inner.list_sessions(prefix)


def _crash_scenarios() -> int:
    backend = FlakyBackend()
    store = Store(backend)
    family(store)
    backend.calls = 0
    delete_session(store, "root")
    return backend.calls


@pytest.mark.parametrize("landed", [False, True], ids=["lost", "landed"])
def test_delete_completes_after_a_crash_at_any_step(landed: bool) -> None:
    steps = _crash_scenarios()
    assert steps > 10
    for step in range(1, steps + 1):
        backend = FlakyBackend()
        backend.lost_appends = landed
        store = Store(backend)
        ids = family(store)
        views = {name: read_view(store, name) for name in ids.values()}
        backend.calls = 0
        backend.fail_at = step
        with pytest.raises(Injected):
            delete_session(store, "root")
        # Whatever state the crash left, no fork lost data: reading is either intact or
        # fails loudly, and running the delete again finishes the job.
        delete_session(store, "root")
        assert store.read("root") == [], step
        for name, view in views.items():
            assert read_view(store, name) == view, (step, name)
        leftovers = [s for s in store.list_sessions() if s.startswith(TEMP_PREFIX)]
        assert leftovers == [], step
