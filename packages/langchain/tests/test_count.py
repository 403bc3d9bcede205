"""The running count (``chatkeep.core.metadata``) through LangChain's
``BaseChatMessageHistory``: a history written only through ``ChatkeepChatMessageHistory``
is counted exactly by ``describe_session``, also when driven by ``RunnableWithMessageHistory``,
and a raced or forged count falls back to the bounded walk, never a wrong figure. On memory
and SQLite."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables import RunnableLambda
from langchain_core.runnables.history import RunnableWithMessageHistory

from chatkeep.core import (
    Message,
    Record,
    Store,
    describe_session,
    encode_records,
    new_id,
    open_store,
    read_view,
    undo,
)
from chatkeep.core.metadata import COUNT_KEY, COUNT_WALK
from chatkeep.langchain import ChatkeepChatMessageHistory

pytestmark = pytest.mark.filterwarnings("ignore:RunnableWithMessageHistory is deprecated")


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    url = "memory://" if request.param == "memory" else f"sqlite:///{tmp_path / 'count.db'}"
    opened = open_store(url)
    yield opened
    opened.close()


def exact(store: Store, session_id: str) -> tuple[int, bool]:
    info = describe_session(store, session_id)
    return info.messages, info.messages_exact


def _long(store: Store, session_id: str, messages: int = COUNT_WALK + 50) -> None:
    batch = [Message.user(f"m{n}", message_id=f"m{n:05d}") for n in range(messages)]
    store.append(session_id, encode_records(batch))


def turn(history: ChatkeepChatMessageHistory, question: str) -> None:
    _ = history.messages
    history.add_messages([HumanMessage(question), AIMessage(f"re: {question}")])


def test_a_runnable_with_message_history_keeps_an_exact_count(store: Store) -> None:
    _long(store, "lc")
    prompt = ChatPromptTemplate.from_messages(
        [MessagesPlaceholder("history"), ("human", "{question}")]
    )

    def model(value: object) -> BaseMessage:
        return AIMessage("ok")

    histories = {
        "whole": lambda session_id: ChatkeepChatMessageHistory(session_id, store=store),
        "windowed": lambda session_id: ChatkeepChatMessageHistory(
            session_id, store=store, max_messages=4
        ),
    }
    for kind in ("whole", "windowed", "windowed"):
        chain = RunnableWithMessageHistory(
            prompt | RunnableLambda(model),
            histories[kind],
            input_messages_key="question",
            history_messages_key="history",
        )
        chain.invoke({"question": "hi"}, config={"configurable": {"session_id": "lc"}})
    assert exact(store, "lc") == (COUNT_WALK + 56, True)
    assert len(read_view(store, "lc")) == COUNT_WALK + 56
    window = ChatkeepChatMessageHistory("lc", store=store, max_messages=2).messages
    assert window == [HumanMessage("hi"), AIMessage("ok")]  # the count is never seen


def test_undo_and_async_writes_keep_it(store: Store) -> None:
    history = ChatkeepChatMessageHistory("lc", store=store, max_messages=3)
    for n in range(5):
        turn(history, f"q{n}")
    assert exact(store, "lc") == (10, True)
    undo(store, "lc")
    asyncio.run(history.aget_messages())  # the retract's count is proved
    asyncio.run(history.aadd_messages([HumanMessage("async")]))
    history.add_messages([AIMessage("and on, without a read")])
    assert exact(store, "lc") == (10, True) == (len(read_view(store, "lc")), True)


def test_another_writer_between_read_and_add_falls_back(store: Store) -> None:
    _long(store, "lc")
    history = ChatkeepChatMessageHistory("lc", store=store)
    turn(history, "whole")
    windowed = ChatkeepChatMessageHistory("lc", store=store, max_messages=4)
    _ = windowed.messages
    store.append("lc", encode_records([Message.user("another process", message_id=new_id())]))
    windowed.add_messages([HumanMessage("late")])
    messages, is_exact = exact(store, "lc")
    assert not is_exact and messages <= len(read_view(store, "lc"))
    turn(windowed, "windowed")  # proves nothing: no count written
    assert not exact(store, "lc")[1]
    turn(history, "whole again")
    assert exact(store, "lc") == (len(read_view(store, "lc")), True)


def test_a_forged_count_is_not_continued(store: Store) -> None:
    history = ChatkeepChatMessageHistory("lc", store=store, max_messages=4)
    for n in range(3):
        turn(history, f"q{n}")
    records = store.read("lc")
    body = json.loads(records[-1].data)
    body["additional_properties"][COUNT_KEY]["after"] = "not-the-record"
    store.append("forged", [*records[:-1], Record(records[-1].id, json.dumps(body).encode())])
    turn(ChatkeepChatMessageHistory("forged", store=store, max_messages=4), "f")
    last = json.loads(store.read("forged", -1)[0].data)
    assert COUNT_KEY not in last["additional_properties"]
    assert exact(store, "forged") == (8, True)  # short: the walk counts it
