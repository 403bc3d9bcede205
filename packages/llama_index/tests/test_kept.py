"""``ChatkeepChatStore`` keeps each conversation decoded between calls: a turn reads a few
records, not the conversation, and whatever else changed the log is seen."""

from __future__ import annotations

from typing import Any

import pytest
from llama_index.core.llms import ChatMessage

from chatkeep.core import Store, open_store, undo
from chatkeep.llama_index import ChatkeepChatStore


class _Counting:
    """A backend that counts the records its reads return."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.records = 0
        self.capabilities = store.capabilities

    def append(self, session_id: str, records: list[Any]) -> None:
        self.store.append(session_id, records)

    def append_if(self, session_id: str, records: list[Any], after: str | None) -> None:
        self.store.append_if(session_id, records, after=after)

    def read(self, session_id: str, start: int = 0, stop: int | None = None) -> list[Any]:
        got = self.store.read(session_id, start, stop)
        self.records += len(got)
        return got


def said(i: int) -> ChatMessage:
    return ChatMessage(role="user" if i % 2 == 0 else "assistant", content=f"message {i}")


def test_a_turn_reads_a_few_records_not_the_conversation(store: Store, sid: str) -> None:
    counting = _Counting(store)
    with Store(counting, name="counting") as counted:
        chat_store = ChatkeepChatStore(store=counted)
        chat_store.set_messages(sid, [said(i) for i in range(300)])
        expected = chat_store.get_messages(sid)  # read once, then kept
        for turn in range(3):
            counting.records = 0
            history = chat_store.get_messages(sid)
            assert history == expected
            for message in (said(300 + 2 * turn), said(301 + 2 * turn)):
                chat_store.add_message(sid, message)
                expected.append(message)
            assert counting.records <= 3, f"read {counting.records} records for a turn"
        assert chat_store.get_messages(sid) == expected
        assert ChatkeepChatStore(store=store).get_messages(sid) == expected


def test_what_other_handles_do_is_seen(store: Store, sid: str) -> None:
    ours = ChatkeepChatStore(store=store)
    theirs = ChatkeepChatStore(store=store)
    ours.set_messages(sid, [said(i) for i in range(4)])
    assert len(ours.get_messages(sid)) == 4
    theirs.add_message(sid, said(4))  # an append elsewhere
    assert ours.get_messages(sid) == theirs.get_messages(sid)
    assert len(ours.get_messages(sid)) == 5
    ours.add_message(sid, said(5))
    theirs.delete_message(sid, 1)  # an edit elsewhere, after our own append
    assert ours.get_messages(sid) == theirs.get_messages(sid)
    assert [m.content for m in ours.get_messages(sid)] == [f"message {i}" for i in (0, 2, 3, 4, 5)]
    undo(store, sid)  # the core's undo of the last turn
    assert ours.get_messages(sid) == ChatkeepChatStore(store=store).get_messages(sid)
    theirs.delete_messages(sid)  # gone, then a new conversation under the same key
    theirs.add_message(sid, said(9))
    assert [m.content for m in ours.get_messages(sid)] == ["message 9"]


def test_the_messages_returned_are_the_callers(sid: str) -> None:
    with open_store("memory://") as store:
        chat_store = ChatkeepChatStore(store=store)
        chat_store.set_messages(sid, [said(0), said(1)])
        first = chat_store.get_messages(sid)
        first[0].content = "changed by the caller"
        first[1].additional_kwargs["session_id"] = "tagged"  # as LlamaIndex's Memory does
        first.append(said(7))
        again = chat_store.get_messages(sid)
        assert [m.content for m in again] == ["message 0", "message 1"]
        assert again == [said(0), said(1)]
        again[0].blocks[0].text = "changed in place"  # type: ignore[union-attr]
        assert chat_store.get_messages(sid) == [said(0), said(1)]


@pytest.mark.anyio
async def test_the_async_interface_keeps_it_too(store: Store, sid: str) -> None:
    counting = _Counting(store)
    with Store(counting, name="counting") as counted:
        chat_store = ChatkeepChatStore(store=counted)
        await chat_store.aset_messages(sid, [said(i) for i in range(100)])
        expected = await chat_store.aget_messages(sid)
        counting.records = 0
        await chat_store.async_add_message(sid, said(100))
        expected.append(said(100))
        assert await chat_store.aget_messages(sid) == expected
        assert counting.records <= 2
        await ChatkeepChatStore(store=store).async_add_message(sid, said(101))
        expected.append(said(101))
        assert await chat_store.aget_messages(sid) == expected


def test_its_own_edits_keep_the_conversation_kept(store: Store, sid: str) -> None:
    counting = _Counting(store)
    with Store(counting, name="counting") as counted:
        chat_store = ChatkeepChatStore(store=counted)
        chat_store.set_messages(sid, [said(i) for i in range(50)])
        chat_store.get_messages(sid)
        for index, inserted in ((25, 100), (-1, 101), (0, 102)):
            assert chat_store.delete_message(sid, index) is not None
            chat_store.add_message(sid, said(inserted), idx=3)
            chat_store.add_message(sid, said(inserted + 10))
            counting.records = 0
            history = chat_store.get_messages(sid)
            assert counting.records <= 2, f"read {counting.records} records after an edit"
            assert history == ChatkeepChatStore(store=store).get_messages(sid)
        assert chat_store.delete_message(sid, 500) is None  # nothing written, still kept
        counting.records = 0
        assert chat_store.get_messages(sid) == ChatkeepChatStore(store=store).get_messages(sid)
        assert counting.records <= 1


def test_an_edit_of_the_kept_conversation_reads_only_its_end(store: Store, sid: str) -> None:
    """Deleting or inserting in the middle of a kept conversation reads the log's last
    record (to trust the kept copy) and writes one record after it: nothing of the
    conversation is read again, and the result is what a fresh reader sees."""
    counting = _Counting(store)
    with Store(counting, name="counting") as counted:
        chat_store = ChatkeepChatStore(store=counted)
        chat_store.set_messages(sid, [said(i) for i in range(400)])
        expected = chat_store.get_messages(sid)
        for step, index in enumerate((200, 0, -1, 150)):
            counting.records = 0
            assert chat_store.delete_message(sid, index) == expected.pop(index)
            chat_store.add_message(sid, said(1000 + step), idx=index)
            expected.insert(index, said(1000 + step))
            chat_store.add_message(sid, said(2000 + step))
            expected.append(said(2000 + step))
            assert chat_store.get_messages(sid) == expected
            assert counting.records <= 6, f"an edit read {counting.records} records"
        assert ChatkeepChatStore(store=store).get_messages(sid) == expected


@pytest.mark.anyio
async def test_async_edits_keep_the_conversation_kept(store: Store, sid: str) -> None:
    counting = _Counting(store)
    with Store(counting, name="counting") as counted:
        chat_store = ChatkeepChatStore(store=counted)
        await chat_store.aset_messages(sid, [said(i) for i in range(200)])
        expected = await chat_store.aget_messages(sid)
        counting.records = 0
        await chat_store.async_add_message(sid, said(500), idx=100)  # kept, not dropped
        expected.insert(100, said(500))
        assert await chat_store.adelete_message(sid, 50) == expected.pop(50)
        assert await chat_store.aget_messages(sid) == expected
        assert counting.records <= 6, f"async edits read {counting.records} records"
        assert await ChatkeepChatStore(store=store).aget_messages(sid) == expected


def test_an_edit_racing_another_writer_is_made_again(store: Store, sid: str) -> None:
    """Another handle appends between our check of the kept conversation (none is read
    when nothing was appended since the last one: the conditional append is the check)
    and our edit: the edit computed on the kept copy is refused (nothing written) and
    made the usual way; the same for an append."""
    ours = ChatkeepChatStore(store=store)
    theirs = ChatkeepChatStore(store=store)
    ours.set_messages(sid, [said(i) for i in range(6)])
    ours.get_messages(sid)
    real = ours._kept.proven

    def then_append(key: str) -> Any:
        known = real(key)
        theirs.add_message(sid, said(99))  # lands after the check
        return known

    ours._kept.proven = then_append  # type: ignore[method-assign]
    assert ours.delete_message(sid, 2) == said(2)
    ours._kept.proven = real  # type: ignore[method-assign]
    wanted = [said(i) for i in (0, 1, 3, 4, 5, 99)]
    assert ours.get_messages(sid) == wanted
    ours._kept.proven = then_append  # type: ignore[method-assign]
    ours.add_message(sid, said(7))
    ours._kept.proven = real  # type: ignore[method-assign]
    wanted += [said(99), said(7)]
    assert ours.get_messages(sid) == wanted
    assert ChatkeepChatStore(store=store).get_messages(sid) == wanted
