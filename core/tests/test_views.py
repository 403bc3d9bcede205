"""Log views: reading a view backward, undo, checkpoints and forks, on the memory backend.

Record counts are asserted through the counting backend (``conftest.CountingBackend``):
the cost of a view is the number of records the store returned, not a timing.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
from collections.abc import Callable
from typing import Any

import pytest

from chatkeep.core import (
    AgentSession,
    CorruptRecord,
    HistoryProvider,
    Message,
    MessageNotFound,
    Record,
    SessionExists,
    SessionNotFound,
    SlidingWindowReducer,
    Store,
    ViewError,
    compact,
    decode_records,
    encode_records,
    fork,
    new_id,
    read_messages,
    read_view,
    undo,
)
from chatkeep.core.views import (
    Checkpoint,
    acompact,
    afork,
    aread_view,
    aundo,
    edit_delete,
    edit_insert,
    edit_replace,
    edit_set,
    edit_splice,
)
from chatkeep.core.views._control import CHECKPOINT, FORK, RETRACT, SPLICE, Control, parse_entry

MakeStore = Callable[..., tuple[Store, Any]]


def user(text: str) -> Message:
    return Message.user(text, message_id=new_id())


def assistant(text: str) -> Message:
    return Message.assistant(text, message_id=new_id())


def add_turn(store: Store, session: str, text: str) -> list[Message]:
    messages = [user(text), assistant("re: " + text)]
    store.append(session, encode_records(messages))
    return messages


def texts(messages: list[Message]) -> list[str]:
    return [m.text for m in messages]


def records_read(backend: Any) -> int:
    return sum(count for *_, count in backend.reads)


# -- a forward model of the semantics, to check the backward walk against ------------------


def model_states(
    store: Store, session: str
) -> tuple[list[list[Message]], dict[str, list[Message]]]:
    """The view after each record of ``session``'s log, computed front to back, and the
    view right before each record id of its chain (where a retract of it goes back to)."""
    log = store.read(session)
    states: list[list[Message]] = []
    before: dict[str, list[Message]] = {}
    view: list[Message] = []
    for index, record in enumerate(log):
        entry = parse_entry(record.data)
        previous = view
        if isinstance(entry, Message):
            entry.message_id = entry.message_id or record.id
            view = [*view, entry]
        elif entry.kind == FORK:
            assert index == 0
            position = entry["position"]
            parent_states, parent_before = model_states(store, entry["parent"])
            parent_log = store.read(entry["parent"])
            after_fork = {r.id for r in parent_log[position:]}
            before.update({k: v for k, v in parent_before.items() if k not in after_fork})
            view = list(parent_states[position - 1]) if position else []
        elif entry.kind == RETRACT:
            view = list(before[entry["target"]])
        elif entry.kind == CHECKPOINT and index and log[index - 1].id == entry["covers"]:
            keep = entry["keep"]
            view = [*entry["messages"], *(view[-keep:] if keep else [])]
        elif entry.kind == SPLICE and index and log[index - 1].id == entry["covers"]:
            end = max(len(view) - entry["keep"], 0)
            start = max(end - entry["drop"], 0)
            view = [*view[:start], *entry["messages"], *view[end:]]
        before[record.id] = previous
        states.append(view)
    return states, before


def summarize_keeping(keep: int, text: str) -> Callable[[list[Message]], list[Message]]:
    """A reducer: a summary message, then the last ``keep`` messages."""

    def reduce(view: list[Message]) -> list[Message]:
        return [Message.system(text, message_id=new_id()), *(view[-keep:] if keep else [])]

    return reduce


def model_view(store: Store, session: str) -> list[Message]:
    states, _ = model_states(store, session)
    return states[-1] if states else []


# -- reading -------------------------------------------------------------------------------------


def test_view_of_a_plain_log_is_its_messages(counting_store: MakeStore) -> None:
    store, _backend = counting_store()
    for i in range(5):
        add_turn(store, "s", f"q{i}")
    assert read_view(store, "s") == read_messages(store, "s")
    assert texts(read_view(store, "s", limit=3)) == ["re: q3", "q4", "re: q4"]
    assert read_view(store, "unknown") == []
    assert read_view(store, "s", limit=0) == []


def test_window_reads_only_the_tail(counting_store: MakeStore) -> None:
    store, backend = counting_store()
    for i in range(300):
        add_turn(store, "s", f"q{i}")
    backend.reads.clear()
    assert len(read_view(store, "s", limit=20)) == 20
    assert backend.reads == [("s", -20, None, 20)]


def test_control_records_are_skipped_by_raw_decoding_but_unknown_kinds_fail() -> None:
    good = user("hello")
    control = Record("c1", b'{"type":"chatkeep.retract","target":"x"}')
    assert decode_records("s", [control, *encode_records([good])]) == [good]
    future = Record("c2", b'{"type":"chatkeep.teleport","to":"x"}')
    with pytest.raises(CorruptRecord) as info:
        decode_records("s", [*encode_records([good]), future])
    assert info.value.position == 1
    assert "chatkeep.teleport" in str(info.value)


def test_unknown_control_kind_in_a_view_is_corrupt_not_skipped(counting_store: MakeStore) -> None:
    store, _ = counting_store()
    add_turn(store, "s", "q")
    store.append("s", [Record("c2", b'{"type":"chatkeep.teleport"}')])
    add_turn(store, "s", "q2")
    with pytest.raises(CorruptRecord) as info:
        read_view(store, "s")
    assert info.value.position == 2
    assert info.value.record_id == "c2"
    # A window that does not reach it is fine.
    assert texts(read_view(store, "s", limit=2)) == ["q2", "re: q2"]


def test_malformed_control_record_is_corrupt(counting_store: MakeStore) -> None:
    store, _ = counting_store()
    store.append("s", [Record("c", b'{"type":"chatkeep.retract","target":5}')])
    with pytest.raises(CorruptRecord, match="target"):
        read_view(store, "s")


def test_corrupt_record_far_back_gets_its_absolute_position(counting_store: MakeStore) -> None:
    store, _ = counting_store()
    for start in range(0, 1000, 250):
        store.append(
            "s", encode_records([user(f"q{i}") for i in range(start * 2, start * 2 + 500)])
        )
    store.append("s", [Record("bad", b"\xff")])
    store.append("s", encode_records([user(f"r{i}") for i in range(1000)]))
    # Found in a slice that does not reach the start: its position is worked out after.
    with pytest.raises(CorruptRecord) as info:
        read_view(store, "s")
    assert info.value.position == 2000
    assert info.value.record_id == "bad"


@pytest.mark.parametrize("burst", [40, 600])
def test_concurrent_appends_during_a_backward_walk_are_not_fed_twice(burst: int) -> None:
    from chatkeep.core.memory import MemoryStore

    class Racing:
        """Another writer appends right before each of the walk's later slices."""

        def __init__(self) -> None:
            self.inner = MemoryStore()
            self.reads: list[tuple[int, int | None]] = []
            self.racing = False

        def append(self, session_id: str, records: list[Record]) -> None:
            self.inner.append(session_id, records)

        def read(self, session_id: str, start: int = 0, stop: int | None = None) -> list[Record]:
            if self.racing and self.reads:
                late = [user(f"late {len(self.reads)}.{n}") for n in range(burst)]
                self.inner.append(session_id, encode_records(late))
            self.reads.append((start, stop))
            return self.inner.read(session_id, start, stop)

    backend = Racing()
    store = Store(backend, name="racing")
    for i in range(400):
        add_turn(store, "s", f"q{i}")
    expected = read_view(store, "s")
    backend.reads.clear()
    backend.racing = True
    # Each later slice finds its anchor moved by the records appended meanwhile.
    assert read_view(store, "s") == expected
    assert len(backend.reads) >= 3
    backend.racing = False
    expected = read_view(store, "s")
    backend.racing = False
    add_turn(store, "s", "undone")
    undo(store, "s")  # a retract makes even a window walk take a second slice
    expected = read_view(store, "s")
    backend.reads.clear()
    backend.racing = True
    assert read_view(store, "s", limit=500) == expected[-500:]


# -- undo ----------------------------------------------------------------------------------------


def test_undo_retracts_the_last_turn_and_keeps_the_audit_trail(counting_store: MakeStore) -> None:
    store, backend = counting_store()
    for i in range(3):
        add_turn(store, "s", f"q{i}")
    appends_before = len(backend.appends)
    retracted = undo(store, "s")
    assert texts(retracted) == ["q2", "re: q2"]
    assert len(backend.appends) == appends_before + 1  # one retract record, nothing rewritten
    assert texts(read_view(store, "s")) == ["q0", "re: q0", "q1", "re: q1"]
    assert texts(read_messages(store, "s")) == [
        "q0",
        "re: q0",
        "q1",
        "re: q1",
        "q2",
        "re: q2",
    ]
    add_turn(store, "s", "again")  # a later append continues normally
    assert texts(read_view(store, "s"))[-2:] == ["again", "re: again"]
    assert len(read_view(store, "s")) == 6


def test_undo_several_turns_and_more_than_there_are(counting_store: MakeStore) -> None:
    store, _ = counting_store()
    for i in range(4):
        add_turn(store, "s", f"q{i}")
    assert texts(undo(store, "s", turns=2)) == ["q2", "re: q2", "q3", "re: q3"]
    assert texts(read_view(store, "s")) == ["q0", "re: q0", "q1", "re: q1"]
    assert len(undo(store, "s", turns=10)) == 4
    assert read_view(store, "s") == []
    assert undo(store, "s") == []
    assert undo(store, "never-written") == []


def test_a_turn_starts_at_the_first_of_several_user_messages(counting_store: MakeStore) -> None:
    store, _ = counting_store()
    add_turn(store, "s", "q0")
    store.append("s", encode_records([user("a"), user("b"), assistant("c")]))
    assert texts(undo(store, "s")) == ["a", "b", "c"]


def test_undo_twice_in_a_row_goes_back_two_turns(counting_store: MakeStore) -> None:
    store, _ = counting_store()
    for i in range(3):
        add_turn(store, "s", f"q{i}")
    undo(store, "s")
    undo(store, "s")
    assert texts(read_view(store, "s")) == ["q0", "re: q0"]
    assert read_view(store, "s") == model_view(store, "s")


@pytest.mark.parametrize("turns", [1, 3])
def test_undo_rejects_bad_turns(counting_store: MakeStore, turns: int) -> None:
    store, _ = counting_store()
    with pytest.raises(ValueError):
        undo(store, "s", turns=-turns)


def test_undo_far_back_grows_its_window(counting_store: MakeStore) -> None:
    store, _ = counting_store()
    add_turn(store, "s", "first")
    store.append("s", encode_records([assistant(f"monologue {i}") for i in range(100)]))
    retracted = undo(store, "s")
    assert len(retracted) == 102
    assert read_view(store, "s") == []


def test_undo_refuses_to_go_back_to_a_message_only_a_checkpoint_holds(
    counting_store: MakeStore,
) -> None:
    store, _ = counting_store()
    add_turn(store, "s", "q0")
    invented = user("a user message only the reducer wrote")
    compact(store, "s", lambda view: [invented])
    with pytest.raises(ViewError, match="checkpoint"):
        undo(store, "s")
    assert texts(read_view(store, "s")) == ["a user message only the reducer wrote"]


def test_retract_whose_target_is_missing_is_corrupt(counting_store: MakeStore) -> None:
    store, _ = counting_store()
    add_turn(store, "s", "q0")
    store.append("s", [Record("r", b'{"type":"chatkeep.retract","target":"nope"}')])
    with pytest.raises(CorruptRecord, match="not in the log") as info:
        read_view(store, "s")
    assert info.value.position == 2


# -- checkpoints ---------------------------------------------------------------------------------


def test_compaction_checkpoint_makes_loads_cost_the_view(counting_store: MakeStore) -> None:
    store, backend = counting_store()
    for i in range(2000):
        add_turn(store, "s", f"q{i}")
    summary = Message.system("summary of 3990 messages", message_id=new_id())
    checkpoint = compact(store, "s", lambda view: [summary, *view[-10:]])
    assert checkpoint is not None
    assert checkpoint.keep == 10
    assert checkpoint.messages == [summary]  # the kept tail is not copied
    add_turn(store, "s", "after")
    backend.reads.clear()
    view = read_view(store, "s")
    assert texts(view)[0] == "summary of 3990 messages"
    assert len(view) == 13
    assert records_read(backend) <= 130  # a constant, not the 4,000-message transcript
    assert len(read_messages(store, "s")) == 4002  # the transcript is whole


def test_compact_with_no_change_writes_nothing(counting_store: MakeStore) -> None:
    store, backend = counting_store()
    add_turn(store, "s", "q")
    appends = len(backend.appends)
    assert compact(store, "s", lambda view: view) is None
    assert compact(store, "empty", lambda view: []) is None
    assert len(backend.appends) == appends


def test_stale_checkpoint_is_ignored(counting_store: MakeStore) -> None:
    store, _ = counting_store()
    first = add_turn(store, "s", "q0")
    add_turn(store, "s", "q1")
    # A checkpoint that names an older record than the one before it lost a race.
    stale = Checkpoint(covers=first[1].message_id or "", keep=0, messages=[user("forget")])
    store.append("s", [stale.to_record()])
    assert texts(read_view(store, "s")) == ["q0", "re: q0", "q1", "re: q1"]


def test_nested_checkpoints_match_the_forward_model(counting_store: MakeStore) -> None:
    store, _ = counting_store()
    rng = random.Random(7)
    for step in range(60):
        add_turn(store, "s", f"q{step}")
        if step % 7 == 3:
            keep = rng.randint(0, 9)
            compact(store, "s", summarize_keeping(keep, f"summary {step}"))
        expected = model_view(store, "s")
        assert read_view(store, "s") == expected, step
        for limit in (1, 2, 5, 13):
            assert read_view(store, "s", limit=limit) == expected[-limit:], (step, limit)


def test_random_operations_match_the_forward_model(counting_store: MakeStore) -> None:
    store, _ = counting_store()
    rng = random.Random(20240611)
    sessions = ["root"]
    add_turn(store, "root", "start")
    for step in range(250):
        session = rng.choice(sessions)
        action = rng.random()
        if action < 0.5:
            add_turn(store, session, f"{session[:4]}-{step}")
        elif action < 0.65:
            undo(store, session, turns=rng.randint(1, 2))
        elif action < 0.8:
            keep = rng.randint(0, 6)
            with contextlib.suppress(ViewError):
                compact(store, session, summarize_keeping(keep, "sum"))
        elif len(sessions) < 12:
            view = read_view(store, session)
            at = rng.choice([None, *(m.message_id for m in view[-4:] if m.role != "system")])
            sessions.append(fork(store, session, at=at))
        for name in sessions:
            expected = model_view(store, name)
            assert read_view(store, name) == expected, (step, name)
            limit = rng.randint(1, 8)
            assert read_view(store, name, limit=limit) == expected[-limit:], (step, name, limit)


def _random_edit(store: Store, session: str, rng: random.Random, step: int) -> None:
    """One in-place edit of ``session``'s view, of a random kind and place."""
    size = len(read_view(store, session))
    fresh = Message.user(f"edit {step}")
    action = rng.randrange(5)
    with contextlib.suppress(IndexError):
        if action == 0:
            edit_insert(store, session, rng.randint(-size - 1, size + 1), fresh)
        elif action == 1:
            edit_delete(store, session, rng.randint(-size, max(size - 1, 0)))
        elif action == 2:
            edit_replace(store, session, rng.randint(-size, max(size - 1, 0)), fresh)
        elif action == 3:
            start = rng.randint(-size - 1, size)
            stop = start + rng.randint(0, 3)
            edit_splice(store, session, start, stop, [fresh] * rng.randint(0, 2))
        else:
            view = read_view(store, session)
            keep = rng.randint(0, len(view))
            edit_set(store, session, [*view[: keep // 2], fresh, *view[keep:]])


def test_random_edits_with_undo_forks_and_checkpoints_match_the_forward_model(
    counting_store: MakeStore,
) -> None:
    """In-place edits (chatkeep.splice, and the retracts and checkpoints they write)
    mixed with turns, undo, compaction and forks: every window of every session is the
    forward model's."""
    store, _ = counting_store()
    rng = random.Random(26)
    sessions = ["root"]
    add_turn(store, "root", "start")
    for step in range(140):
        session = rng.choice(sessions)
        action = rng.random()
        if action < 0.35:
            add_turn(store, session, f"{session[:4]}-{step}")
        elif action < 0.7:
            _random_edit(store, session, rng, step)
        elif action < 0.8:
            with contextlib.suppress(ViewError):
                undo(store, session, turns=rng.randint(1, 2))
        elif action < 0.9:
            with contextlib.suppress(ViewError):
                compact(store, session, summarize_keeping(rng.randint(0, 6), "sum"))
        elif len(sessions) < 8:
            sessions.append(fork(store, session))
        for name in sessions:
            expected = model_view(store, name)
            assert read_view(store, name) == expected, (step, name)
            for limit in (1, rng.randint(2, 9)):
                got = read_view(store, name, limit=limit)
                assert got == expected[-limit:], (step, name, limit)


def test_checkpoint_between_keeps_the_common_tail_by_reference() -> None:
    view = [user("a"), assistant("b"), user("c")]
    assert Checkpoint.between(view, view, "x") is None
    window = Checkpoint.between(view, view[-2:], "x")
    assert window is not None and (window.keep, window.messages) == (2, [])
    summary = Message.system("s")
    summarized = Checkpoint.between(view, [summary, view[-1]], "x")
    assert summarized is not None
    assert summarized.keep == 1
    assert summarized.messages[0].text == "s" and summarized.messages[0].message_id
    assert json.loads(summarized.to_record().data)["type"] == "chatkeep.checkpoint"


# -- forks ---------------------------------------------------------------------------------------


def test_fork_continues_without_copying_the_parent(counting_store: MakeStore) -> None:
    store, backend = counting_store()
    for i in range(1000):
        add_turn(store, "p", f"q{i}")
    backend.reads.clear()
    appends_before = len(backend.appends)
    child = fork(store, "p")
    assert records_read(backend) <= 64  # O(log n) probes, no copy
    new_batches = backend.appends[appends_before:]
    assert [len(batch) for _, batch in new_batches] == [1, 1]  # registration + fork record
    add_turn(store, child, "child")
    add_turn(store, "p", "parent")
    assert texts(read_view(store, child))[-4:] == ["q999", "re: q999", "child", "re: child"]
    assert texts(read_view(store, "p"))[-2:] == ["parent", "re: parent"]
    assert len(read_view(store, child)) == 2002
    assert len(store.read(child)) == 3  # fork record + its own turn


def test_fork_at_a_message_and_forks_of_forks(counting_store: MakeStore) -> None:
    store, _ = counting_store()
    turns = [add_turn(store, "p", f"q{i}") for i in range(5)]
    at = turns[1][1].message_id
    child = fork(store, "p", at=at)
    assert texts(read_view(store, child)) == ["q0", "re: q0", "q1", "re: q1"]
    add_turn(store, child, "c")
    grandchild = fork(store, child)
    add_turn(store, grandchild, "g")
    assert texts(read_view(store, grandchild)) == [
        "q0",
        "re: q0",
        "q1",
        "re: q1",
        "c",
        "re: c",
        "g",
        "re: g",
    ]
    # Fork a fork at a message of its parent's prefix: it is registered where the data is.
    cousin = fork(store, grandchild, at=turns[0][0].message_id)
    assert texts(read_view(store, cousin)) == ["q0"]
    assert read_view(store, grandchild, limit=3) == read_view(store, grandchild)[-3:]


def test_fork_at_a_retracted_message_sees_the_log_as_it_was(counting_store: MakeStore) -> None:
    store, _ = counting_store()
    add_turn(store, "p", "q0")
    lost = add_turn(store, "p", "q1")
    undo(store, "p")
    child = fork(store, "p", at=lost[1].message_id)
    assert texts(read_view(store, child)) == ["q0", "re: q0", "q1", "re: q1"]


def test_undo_in_a_fork_reaches_into_the_prefix_and_spares_the_parent(
    counting_store: MakeStore,
) -> None:
    store, _ = counting_store()
    for i in range(3):
        add_turn(store, "p", f"q{i}")
    child = fork(store, "p")
    assert texts(undo(store, child, turns=2)) == ["q1", "re: q1", "q2", "re: q2"]
    assert texts(read_view(store, child)) == ["q0", "re: q0"]
    assert len(read_view(store, "p")) == 6


def test_fork_errors(counting_store: MakeStore) -> None:
    store, _ = counting_store()
    with pytest.raises(SessionNotFound):
        fork(store, "nothing-here")
    add_turn(store, "p", "q")
    with pytest.raises(MessageNotFound):
        fork(store, "p", at="no-such-message")
    with pytest.raises(SessionNotFound):
        fork(store, "nothing-here", at="x")
    named = fork(store, "p", new_session_id="named-fork")
    assert named == "named-fork"
    with pytest.raises(SessionExists):
        fork(store, "p", new_session_id="named-fork")
    with pytest.raises(SessionExists):
        fork(store, "p", new_session_id="p")


def test_a_fork_whose_parent_was_erased_behind_its_back_is_corrupt_not_empty(
    counting_store: MakeStore,
) -> None:
    store, _ = counting_store()
    add_turn(store, "p", "q")
    child = fork(store, "p")
    store.delete("p")  # the raw hook, bypassing delete_session
    with pytest.raises(CorruptRecord, match="no longer holds"):
        read_view(store, child)


def test_forked_records_are_not_part_of_the_parent_view(counting_store: MakeStore) -> None:
    store, _ = counting_store()
    add_turn(store, "p", "q")
    fork(store, "p")
    fork(store, "p")
    assert texts(read_view(store, "p")) == ["q", "re: q"]
    kinds = [
        e.kind for e in (parse_entry(r.data) for r in store.read("p")) if isinstance(e, Control)
    ]
    assert kinds == ["chatkeep.forked", "chatkeep.forked"]


# -- the done-when numbers: 10,000 messages, a window of 50 ---------------------------------------


@pytest.fixture
def long_session(counting_store: MakeStore) -> tuple[Store, Any, str]:
    store, backend = counting_store()
    messages: list[Message] = []
    for i in range(5000):
        messages += [user(f"q{i}"), assistant(f"a{i}")]
    for start in range(0, len(messages), 1000):
        store.append("long", encode_records(messages[start : start + 1000]))
    return store, backend, "long"


def load_with_window(store: Store, session_id: str, window: int = 50) -> list[Message]:
    provider = HistoryProvider(store, reducer=SlidingWindowReducer(window))
    return asyncio.run(provider.load(AgentSession(session_id)))


def test_window_of_50_over_10000_messages_reads_50_records(
    long_session: tuple[Store, Any, str],
) -> None:
    store, backend, session = long_session
    backend.reads.clear()
    view = load_with_window(store, session)
    assert texts(view)[-1] == "a4999" and len(view) == 50
    assert records_read(backend) <= 2 * 50, backend.reads


def test_window_of_50_over_a_fork_of_10000_messages(long_session: tuple[Store, Any, str]) -> None:
    store, backend, session = long_session
    child = fork(store, session)
    add_turn(store, child, "in the fork")
    grandchild = fork(store, child)
    for name, last in ((child, "re: in the fork"), (grandchild, "re: in the fork")):
        backend.reads.clear()
        view = load_with_window(store, name)
        assert len(view) == 50 and texts(view)[-1] == last
        assert records_read(backend) <= 2 * 50, backend.reads
    middle = fork(store, session, at=read_view(store, session, limit=5000)[0].message_id)
    backend.reads.clear()
    view = load_with_window(store, middle)
    assert len(view) == 50 and texts(view)[-1] == "q2500"
    assert records_read(backend) <= 2 * 50, backend.reads


def test_window_of_50_after_undo_over_10000_messages(long_session: tuple[Store, Any, str]) -> None:
    store, backend, session = long_session
    backend.reads.clear()
    undo(store, session, turns=3)
    assert records_read(backend) <= 2 * 50, backend.reads
    backend.reads.clear()
    view = load_with_window(store, session)
    assert len(view) == 50 and texts(view)[-1] == "a4996"
    assert records_read(backend) <= 2 * 50, backend.reads
    child = fork(store, session)
    undo(store, child)
    backend.reads.clear()
    view = load_with_window(store, child)
    assert len(view) == 50 and texts(view)[-1] == "a4995"
    assert records_read(backend) <= 2 * 50, backend.reads


# -- async twins ---------------------------------------------------------------------------------


def test_async_view_functions(counting_store: MakeStore) -> None:
    store, _ = counting_store()

    async def scenario() -> None:
        for i in range(3):
            await store.aappend("s", encode_records([user(f"q{i}"), assistant(f"a{i}")]))
        assert texts(await aread_view(store, "s", limit=2)) == ["q2", "a2"]
        assert texts(await aundo(store, "s")) == ["q2", "a2"]
        child = await afork(store, "s")
        assert texts(await aread_view(store, child)) == ["q0", "a0", "q1", "a1"]
        checkpoint = await acompact(store, child, lambda view: view[-1:])
        assert checkpoint is not None
        assert texts(await aread_view(store, child)) == ["a1"]

    asyncio.run(scenario())


def test_sync_functions_work_on_an_async_backend() -> None:
    from chatkeep.core.memory import MemoryStore

    class AsyncBackend:
        capabilities = MemoryStore.capabilities - {"recent"}

        def __init__(self) -> None:
            self.inner = MemoryStore()

        async def append(self, session_id: str, records: list[Record]) -> None:
            self.inner.append(session_id, records)

        async def append_if(
            self, session_id: str, records: list[Record], after: str | None
        ) -> None:
            self.inner.append_if(session_id, records, after)

        async def read(
            self, session_id: str, start: int = 0, stop: int | None = None
        ) -> list[Record]:
            return self.inner.read(session_id, start, stop)

        async def delete(self, session_id: str) -> None:
            self.inner.delete(session_id)

    store = Store(AsyncBackend())
    try:
        add_turn(store, "s", "q")
        child = fork(store, "s")
        add_turn(store, child, "c")
        assert texts(read_view(store, child)) == ["q", "re: q", "c", "re: c"]
    finally:
        store.close()
