"""In-place edits (``edit_*``): Python's list semantics, said with one appended record.

The edits are checked against a plain Python list doing the same operations, on a store
with ``conditional`` and on one without; costs are counted in records read through the
counting backend (``conftest.CountingBackend``), not timed.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Callable
from typing import Any, ClassVar

import pytest

from chatkeep.core import (
    CorruptRecord,
    EditOutOfRange,
    Message,
    Record,
    Store,
    encode_records,
    new_id,
    read_view,
)
from chatkeep.core.memory import MemoryStore
from chatkeep.core.metadata import describe_session
from chatkeep.core.views import (
    aedit_delete,
    aedit_insert,
    aedit_replace,
    aedit_set,
    aedit_splice,
    aedit_splice_known,
    edit_delete,
    edit_insert,
    edit_replace,
    edit_set,
    edit_splice,
    edit_splice_known,
    read_log,
    undo,
)

MakeStore = Callable[..., tuple[Store, Any]]


def texts(messages: list[Message]) -> list[str]:
    return [m.text for m in messages]


def fill(store: Store, session: str, count: int, prefix: str = "m") -> None:
    messages = [Message.user(f"{prefix}{i}", message_id=new_id()) for i in range(count)]
    for start in range(0, count, 500):
        store.append(session, encode_records(messages[start : start + 500]))


def kinds(store: Store, session: str) -> list[str]:
    return [entry.kind for entry in read_log(store, session)]


class PlainBackend:
    """A memory backend without ``conditional`` (edits are appended, then checked)."""

    capabilities: ClassVar[frozenset[str]] = MemoryStore.capabilities - {"conditional"}

    def __init__(self) -> None:
        self.inner = MemoryStore()
        #: Records another writer slips in right before the next append (once).
        self.intruders: list[Record] = []

    def append(self, session_id: str, records: list[Record]) -> None:
        if self.intruders:
            intruders, self.intruders = self.intruders, []
            self.inner.append(session_id, intruders)
        self.inner.append(session_id, records)

    def read(self, session_id: str, start: int = 0, stop: int | None = None) -> list[Record]:
        return self.inner.read(session_id, start, stop)


def _random_step(
    rng: random.Random, store: Store, session: str, model: list[str], step: int
) -> None:
    """One random edit done to the store and to the list ``model``; results compared."""
    size = len(model)
    text = f"n{step}"
    action = rng.randrange(6)
    if action == 0:
        index = rng.randint(-size - 2, size + 2)
        edit_insert(store, session, index, Message.user(text))
        model.insert(index, text)
    elif action in (1, 2):
        index = rng.randint(-size - 1, size) if size else 0
        if -size <= index < size:
            assert edit_delete(store, session, index).text == model.pop(index)
        else:
            with pytest.raises(EditOutOfRange):
                edit_delete(store, session, index)
    elif action == 3 and size:
        index = rng.randint(-size, size - 1)
        assert edit_replace(store, session, index, Message.user(text)).text == model[index]
        model[index] = text
    elif action == 4:
        start = rng.choice([None, rng.randint(-size - 2, size + 2)])
        stop = rng.choice([None, rng.randint(-size - 2, size + 2)])
        new = [f"{text}.{k}" for k in range(rng.randint(0, 3))]
        removed = edit_splice(store, session, start, stop, [Message.user(t) for t in new])
        assert texts(removed) == model[start:stop]
        model[start:stop] = new
    else:
        wanted = [*model[: rng.randint(0, size)], text, *model[rng.randint(0, size) :]]
        view = read_view(store, session)
        by_text = {m.text: m for m in view}
        before = edit_set(store, session, [by_text.get(t) or Message.user(t) for t in wanted])
        assert texts(before) == model
        model[:] = wanted


@pytest.mark.parametrize("conditional", [True, False], ids=["conditional", "plain"])
def test_edits_follow_python_list_semantics(counting_store: MakeStore, conditional: bool) -> None:
    store = counting_store()[0] if conditional else Store(PlainBackend(), name="plain")
    rng = random.Random(26)
    model = [f"m{i}" for i in range(6)]
    fill(store, "s", 6)
    for step in range(200):
        _random_step(rng, store, "s", model, step)
        assert texts(read_view(store, "s")) == model, step
        limit = rng.randint(1, 6)
        assert texts(read_view(store, "s", limit=limit)) == model[-limit:], (step, limit)
        if step % 20 == 0:
            info = describe_session(store, "s")
            assert info.messages == len(model), step


def test_each_edit_is_one_record_of_the_cheapest_kind(counting_store: MakeStore) -> None:
    store, _ = counting_store()
    fill(store, "s", 5)
    edit_insert(store, "s", 5, Message.user("at the end"))
    assert kinds(store, "s")[-1] == "message", "adding at the end is an append"
    edit_delete(store, "s")
    assert kinds(store, "s")[-1] == "chatkeep.retract", "taking the end off is a retract"
    edit_delete(store, "s", 0)
    assert kinds(store, "s")[-1] == "chatkeep.checkpoint", "an edit at the start: checkpoint"
    edit_replace(store, "s", 2, Message.user("new"))
    assert kinds(store, "s")[-1] == "chatkeep.splice"
    view = read_view(store, "s")
    edit_set(store, "s", [*view, Message.user("more")])
    assert kinds(store, "s")[-1] == "message", "set to the view plus more appends the more"
    assert texts(read_view(store, "s")) == ["m1", "m2", "new", "m4", "more"]
    assert len(store.read("s")) == 10, "one record per edit, nothing rewritten"
    assert len([e for e in read_log(store, "s") if e.is_message]) == 7


def test_edit_messages_keep_their_ids_or_get_one(counting_store: MakeStore) -> None:
    store, _ = counting_store()
    fill(store, "s", 3)
    mine = Message.assistant("redacted", message_id="keep-me")
    edit_replace(store, "s", 1, mine)
    edit_insert(store, "s", 1, Message.user("no id"))
    view = read_view(store, "s")
    assert view[2] == mine
    assert view[1].message_id and len({m.message_id for m in view}) == 4


def test_out_of_range_and_bad_arguments_change_nothing(counting_store: MakeStore) -> None:
    store, _ = counting_store()
    fill(store, "s", 2)
    before = store.read("s")
    for index in (2, 9, -3):
        with pytest.raises(EditOutOfRange) as error:
            edit_delete(store, "s", index)
        assert isinstance(error.value, IndexError) and "nothing was changed" in str(error.value)
        with pytest.raises(IndexError):
            edit_replace(store, "s", index, Message.user("x"))
    with pytest.raises(EditOutOfRange):
        edit_delete(store, "unknown")
    with pytest.raises(TypeError):
        edit_delete(store, "s", "1")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        edit_splice(store, "s", 0, True, [])  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        edit_insert(store, "s", 0, {"role": "user"})  # type: ignore[arg-type]
    assert edit_splice(store, "s", 1, 1, []) == [], "an empty splice is a no-op"
    assert store.read("s") == before


def test_edits_on_an_unknown_or_empty_session(counting_store: MakeStore) -> None:
    store, _ = counting_store()
    assert edit_set(store, "new", []) == [] and store.read("new") == []
    edit_insert(store, "new", 3, Message.user("first"))
    assert kinds(store, "new") == ["message"]
    assert texts(edit_set(store, "new", [])) == ["first"]
    assert read_view(store, "new") == [] and len(store.read("new")) == 2
    edit_insert(store, "new", 0, Message.user("again"))
    assert texts(read_view(store, "new")) == ["again"]


def test_a_window_after_edits_reads_about_the_window(counting_store: MakeStore) -> None:
    store, backend = counting_store()
    fill(store, "s", 3000)
    edit_delete(store, "s", 5)
    edit_insert(store, "s", 1500, Message.user("middle"))
    edit_replace(store, "s", -1, Message.user("last"))
    edit_delete(store, "s", -2)
    backend.reads.clear()
    window = read_view(store, "s", limit=50)
    assert texts(window)[-2:] == ["m2997", "last"] and len(window) == 50
    read = sum(count for *_, count in backend.reads)
    assert read <= 2 * 50, f"read {read} records for a window of 50"


def test_an_edit_near_the_end_costs_what_it_touches(counting_store: MakeStore) -> None:
    """Deleting or replacing the last message of a long session reads a few records (the
    running count at the end of the log gives the length; the window gives the message)."""
    store, backend = counting_store()
    fill(store, "s", 3000)
    edit_set(store, "s", [*read_view(store, "s"), Message.user("counted")])  # marks the count
    for edit in (
        lambda: edit_delete(store, "s", -1),
        lambda: edit_replace(store, "s", 2998, Message.user("fixed")),
        lambda: edit_insert(store, "s", 2990, Message.user("late")),
    ):
        backend.reads.clear()
        edit()
        read = sum(count for *_, count in backend.reads)
        assert read <= 40, f"an edit near the end read {read} records"
    assert texts(read_view(store, "s", limit=3)) == ["m2997", "fixed", "m2999"]
    assert texts(read_view(store, "s"))[2988:2992] == ["m2988", "m2989", "late", "m2990"]
    assert describe_session(store, "s").messages == 3001


def test_setting_the_view_again_and_again_keeps_whole_reads_at_the_view(
    counting_store: MakeStore,
) -> None:
    store, backend = counting_store()
    fill(store, "s", 40)
    for round_number in range(60):
        view = read_view(store, "s")
        edit_set(store, "s", [*view[1:], Message.user(f"r{round_number}")])
    backend.reads.clear()
    view = read_view(store, "s")
    assert len(view) == 40 and view[-1].text == "r59"
    read = sum(count for *_, count in backend.reads)
    assert read <= 3 * 40 + 64, f"a whole read of a 40-message view read {read} records"


def test_an_edit_that_lost_a_race_on_a_plain_store_is_written_again() -> None:
    backend = PlainBackend()
    store = Store(backend, name="plain")
    fill(store, "s", 4)
    intruder = Message.user("intruder", message_id=new_id())
    backend.intruders = encode_records([intruder])
    assert edit_delete(store, "s", 1).text == "m1"
    # The first splice landed after the intruder, covers the wrong record and is ignored;
    # the edit was computed again from the view with the intruder in it.
    assert texts(read_view(store, "s")) == ["m0", "m2", "m3", "intruder"]
    assert kinds(store, "s")[-2:] == ["chatkeep.splice", "chatkeep.splice"]


def test_a_splice_record_missing_a_field_is_corrupt(counting_store: MakeStore) -> None:
    store, _ = counting_store()
    fill(store, "s", 2)
    last = store.read("s", -1)[0].id
    body = {"type": "chatkeep.splice", "covers": last, "keep": 0, "messages": []}
    store.append("s", [Record(new_id(), json.dumps(body).encode())])
    with pytest.raises(CorruptRecord) as error:
        read_view(store, "s")
    assert error.value.position == 2 and "drop" in str(error.value)


def test_undo_after_an_edit(counting_store: MakeStore) -> None:
    """Undo retracts from the turn's first record on: an edit written since is undone too
    (the log goes back to how it was when the turn began)."""
    store, _ = counting_store()
    first = [Message.user("q0", message_id=new_id()), Message.assistant("a0", message_id=new_id())]
    second = [Message.user("q1", message_id=new_id()), Message.assistant("a1", message_id=new_id())]
    store.append("s", encode_records(first))
    store.append("s", encode_records(second))
    edit_replace(store, "s", 0, Message.user("q0, edited"))
    assert texts(read_view(store, "s")) == ["q0, edited", "a0", "q1", "a1"]
    undo(store, "s")
    assert texts(read_view(store, "s")) == ["q0", "a0"]


def test_async_twins() -> None:
    store = Store(MemoryStore(), name="memory")

    async def scenario() -> list[str]:
        fill(store, "s", 3)
        await aedit_insert(store, "s", 0, Message.user("head"))
        removed = await aedit_delete(store, "s", 1)
        assert removed.text == "m0"
        replaced = await aedit_replace(store, "s", -1, Message.user("tail"))
        assert replaced.text == "m2"
        assert texts(await aedit_splice(store, "s", 1, 2, [Message.user("mid")])) == ["m1"]
        before = await aedit_set(store, "s", [*read_view(store, "s"), Message.user("end")])
        assert texts(before) == ["head", "mid", "tail"]
        return texts(read_view(store, "s"))

    assert asyncio.run(scenario()) == ["head", "mid", "tail", "end"]


@pytest.mark.parametrize("conditional", [True, False], ids=["conditional", "plain"])
def test_a_known_view_is_edited_without_reading_it(
    counting_store: MakeStore, conditional: bool
) -> None:
    """``edit_splice_known`` on a view the caller holds: Python's slice rules on the held
    list, one record written after the given newest record, nothing read on a store with
    ``conditional`` (a plain store reads back where its record landed); the result is
    what ``read_view`` sees and the running count stays exact."""
    if conditional:
        store, backend = counting_store()
    else:
        store, backend = Store(PlainBackend(), name="plain"), None
    rng = random.Random(2626)
    fill(store, "s", 30)
    model = [f"m{i}" for i in range(30)]
    for step in range(120):
        size = len(model)
        newest = store.read("s", -1)[0].id
        start = rng.choice([None, rng.randint(-size - 2, size + 2)])
        stop = rng.choice([None, rng.randint(-size - 2, size + 2)])
        new = [f"k{step}.{k}" for k in range(rng.randint(0, 2))]
        if backend is not None:
            backend.reads.clear()
        done = edit_splice_known(
            store,
            "s",
            start,
            stop,
            [Message.user(t) for t in new],
            newest_record_id=newest,
            length=size,
        )
        assert done is not None, step
        if backend is not None:
            assert backend.reads == [], f"step {step} read {backend.reads}"
        expected = list(model)
        expected[start:stop] = new
        model[done.first : done.last] = new
        assert model == expected, step
        assert texts(read_view(store, "s")) == model, step
        if done.first != done.last or new:
            assert store.read("s", -1)[0].id == done.newest_record_id, step
        if step % 30 == 0:
            assert describe_session(store, "s").messages == len(model), step


def test_a_known_view_that_is_stale_writes_nothing_readers_honour(
    counting_store: MakeStore,
) -> None:
    store, _ = counting_store()
    fill(store, "s", 5)
    newest = store.read("s", -1)[0].id
    store.append("s", encode_records([Message.user("other", message_id=new_id())]))
    before = len(store.read("s"))
    assert edit_splice_known(store, "s", 1, 2, newest_record_id=newest, length=5) is None
    assert len(store.read("s")) == before, "a conditional store writes nothing"
    # On a plain store the record lands after the other writer's and covers the wrong one.
    backend = PlainBackend()
    plain = Store(backend, name="plain")
    fill(plain, "s", 5)
    newest = plain.read("s", -1)[0].id
    backend.intruders = encode_records([Message.user("other", message_id=new_id())])
    assert edit_splice_known(plain, "s", 1, 2, newest_record_id=newest, length=5) is None
    assert texts(read_view(plain, "s")) == ["m0", "m1", "m2", "m3", "m4", "other"]
    with pytest.raises(ValueError):
        edit_splice_known(store, "s", 0, 1, newest_record_id=None, length=3)


def test_a_known_view_edit_has_an_async_twin() -> None:
    store = Store(MemoryStore(), name="memory")
    fill(store, "s", 4)

    async def scenario() -> Any:
        newest = store.read("s", -1)[0].id
        return await aedit_splice_known(
            store, "s", 0, 1, [Message.user("head")], newest_record_id=newest, length=4
        )

    done = asyncio.run(scenario())
    assert done is not None and (done.first, done.last) == (0, 1)
    assert texts(read_view(store, "s")) == ["head", "m1", "m2", "m3"]
    assert kinds(store, "s")[-1] == "chatkeep.checkpoint"
