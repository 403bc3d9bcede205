"""``ChatkeepChatMessageHistory`` keeps the plain records its last read took (a
``chatkeep.core.TailCache``): the next read is a tail read, and whatever another history
object (or process) did in between is seen. Run on SQLite, PostgreSQL and Redis."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from chatkeep.core import Message, Store, aundo, encode_records, new_id
from chatkeep.langchain import ChatkeepChatMessageHistory


def _texts(messages: list[Any]) -> list[str]:
    return [message.content for message in messages]


def test_a_kept_history_reads_the_tail_and_sees_other_writers(
    store: Store, sid: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    kept = ChatkeepChatMessageHistory(sid, store=store)
    other = ChatkeepChatMessageHistory(sid, store=store)
    for n in range(3):
        kept.messages  # noqa: B018  (a read, as a chain does before each call)
        kept.add_messages([HumanMessage(f"q{n}")])
        kept.add_messages([AIMessage(f"a{n}")])
    reads: list[tuple[int, int | None]] = []
    cls = type(store)
    real_read = cls.read

    def read(self: Store, session_id: str, start: int = 0, stop: int | None = None) -> Any:
        reads.append((start, stop))
        return real_read(self, session_id, start, stop)

    monkeypatch.setattr(cls, "read", read)  # the class: a Store's slots are read-only
    messages = kept.messages
    assert _texts(messages) == ["q0", "a0", "q1", "a1", "q2", "a2"]
    assert reads == [(-3, None)], "a kept history read more than its tail"
    monkeypatch.undo()
    messages[0].content = "changed by the caller"  # never reaches the cache
    assert _texts(kept.messages)[0] == "q0"

    other.add_messages([HumanMessage("from elsewhere")])
    assert _texts(kept.messages)[-1] == "from elsewhere"
    asyncio.run(aundo(store, sid))  # a retract: not a plain tail, the view is read
    assert kept.messages == ChatkeepChatMessageHistory(sid, store=store).messages
    kept.add_messages([HumanMessage("after the undo")])
    assert kept.messages == ChatkeepChatMessageHistory(sid, store=store).messages
    if store.supports("delete"):
        other.clear()
        store.append(sid, encode_records([Message.user("new", message_id=new_id())]))
        assert _texts(kept.messages) == ["new"]
