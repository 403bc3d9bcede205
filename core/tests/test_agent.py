"""The agent loop over OfflineChatClient: client-managed and service-managed history."""

from __future__ import annotations

import asyncio
import json
import warnings
from collections.abc import Callable
from typing import Any

import pytest

from chatkeep.core import (
    Agent,
    AgentSession,
    ChatResponse,
    CorruptRecord,
    DataContent,
    HistoryProvider,
    InMemoryHistoryProvider,
    Message,
    OfflineChatClient,
    Record,
    Store,
    open_store,
    read_messages,
)
from chatkeep.core.plugins import reset_plugins

# counting_store (conftest) returns (store, CountingBackend).
MakeStore = Callable[..., tuple[Store, Any]]


def reply(seen: int, first: str, latest: str) -> str:
    return f"[seen {seen}] first: {first!r} | latest: {latest!r}"


def texts(messages: list[Message]) -> list[str]:
    return [m.text for m in messages]


# -- client-managed history through a provider -------------------------------------------------


def test_turns_send_history_and_store_one_batch_each(counting_store: MakeStore) -> None:
    store, backend = counting_store()
    client = OfflineChatClient()
    agent = Agent(client, history_provider=HistoryProvider(store))
    session = agent.create_session()
    assert agent.run_sync("hello", session).text == reply(1, "hello", "hello")
    assert agent.run_sync("second", session).text == reply(3, "hello", "second")
    response = agent.run_sync("third", session)
    assert response.text == reply(5, "hello", "third")
    assert response.session is session
    assert all(m.message_id for m in response.messages)
    assert [len(r) for r in client.requests] == [1, 3, 5]
    assert len(backend.appends) == 3
    assert all(len(batch) == 2 for _, batch in backend.appends)
    stored = read_messages(store, session.session_id)
    assert [m.role for m in stored] == ["user", "assistant"] * 3
    assert stored[-1].message_id == response.messages[0].message_id
    # Nothing provider-internal is left in the session between turns.
    assert session.to_dict()["state"] == {}


def test_fifty_turns_store_a_hundred_records(counting_store: MakeStore) -> None:
    store, backend = counting_store()
    agent = Agent(OfflineChatClient(), history_provider=HistoryProvider(store))
    session = agent.create_session()

    async def many() -> None:
        for i in range(50):
            await agent.run(f"q{i}", session)

    asyncio.run(many())
    stored = store.read(session.session_id)
    assert len(stored) == 100
    assert len({record.id for record in stored}) == 100
    assert len(backend.appends) == 50
    assert read_messages(store, session.session_id)[-1].text == reply(99, "q0", "q49")


def test_instructions_are_sent_but_not_stored(counting_store: MakeStore) -> None:
    store, _ = counting_store()
    client = OfflineChatClient()
    agent = Agent(client, history_provider=HistoryProvider(store), instructions="Be brief.")
    session = agent.create_session()
    agent.run_sync("one", session)
    agent.run_sync("two", session)
    assert [m.role for m in client.requests[1]] == ["system", "user", "assistant", "user"]
    assert client.requests[1][0].text == "Be brief."
    assert [m.role for m in read_messages(store, session.session_id)] == ["user", "assistant"] * 2


def test_failed_model_call_stores_nothing(counting_store: MakeStore) -> None:
    store, backend = counting_store()
    client = OfflineChatClient()
    agent = Agent(client, history_provider=HistoryProvider(store))
    session = agent.create_session()
    agent.run_sync("kept", session)
    client.fail_next = True
    with pytest.raises(RuntimeError, match="simulated model failure"):
        agent.run_sync("lost", session)
    assert len(backend.appends) == 1
    assert texts(read_messages(store, session.session_id))[0] == "kept"
    assert agent.run_sync("after", session).text == reply(3, "kept", "after")
    assert len(store.read(session.session_id)) == 4


def test_input_forms(counting_store: MakeStore) -> None:
    store, _ = counting_store()
    agent = Agent(OfflineChatClient(), history_provider=HistoryProvider(store))
    session = agent.create_session()
    own = Message.user("with my id", message_id="my-id")
    agent.run_sync(own, session)
    agent.run_sync([Message.user("a"), Message.user("b")], session)
    stored = read_messages(store, session.session_id)
    assert stored[0].message_id == "my-id"
    assert texts(stored)[2:4] == ["a", "b"]
    with pytest.raises(TypeError):
        agent.run_sync(["not a message"], session)  # type: ignore[list-item]


def test_run_without_a_session_creates_one(counting_store: MakeStore) -> None:
    store, _ = counting_store()
    agent = Agent(OfflineChatClient(), history_provider=HistoryProvider(store))
    response = agent.run_sync("hi")
    assert isinstance(response.session, AgentSession)
    assert len(store.read(response.session.session_id)) == 2


def test_async_chat_clients_are_awaited(counting_store: MakeStore) -> None:
    class AsyncClient:
        async def get_response(
            self, messages: list[Message], *, conversation_id: str | None = None
        ) -> ChatResponse:
            await asyncio.sleep(0)
            return ChatResponse([Message.assistant(f"saw {len(messages)}")])

    store, _ = counting_store()
    agent = Agent(AsyncClient(), history_provider=HistoryProvider(store))
    session = agent.create_session()
    agent.run_sync("a", session)
    assert agent.run_sync("b", session).text == "saw 3"


def test_client_returning_the_wrong_type_is_reported(counting_store: MakeStore) -> None:
    class Broken:
        def get_response(self, messages: list[Message], **_: Any) -> Any:
            return "just a string"

    store, backend = counting_store()
    agent = Agent(Broken(), history_provider=HistoryProvider(store))
    with pytest.raises(TypeError, match="ChatResponse"):
        agent.run_sync("x")
    assert backend.appends == []


def test_corrupt_history_raises_instead_of_being_skipped(counting_store: MakeStore) -> None:
    store, _ = counting_store()
    agent = Agent(OfflineChatClient(), history_provider=HistoryProvider(store))
    session = agent.create_session("damaged")
    agent.run_sync("fine", session)
    store.append("damaged", [Record("junk", b"\x00not a message")])
    with pytest.raises(CorruptRecord) as info:
        agent.run_sync("next", session)
    assert info.value.session_id == "damaged"
    assert info.value.position == 2


def test_get_service_finds_the_provider_and_client(counting_store: MakeStore) -> None:
    store, _ = counting_store()
    client = OfflineChatClient()
    provider = HistoryProvider(store)
    agent = Agent(client, history_provider=provider)
    assert agent.get_service(HistoryProvider) is provider
    assert agent.get_service(OfflineChatClient) is client
    assert agent.get_service(InMemoryHistoryProvider) is None
    assert Agent(OfflineChatClient()).get_service(HistoryProvider) is None


# -- resuming ---------------------------------------------------------------------------------


def test_resume_by_session_id_on_a_named_memory_store(memory_url: str) -> None:
    first = Agent(OfflineChatClient(), history_provider=HistoryProvider(memory_url))
    session = first.create_session()
    first.run_sync("remember the number 42", session)
    first.run_sync("and the colour blue", session)

    # Later, elsewhere: a new agent, provider and client, and nothing but the id.
    again = Agent(OfflineChatClient(), history_provider=HistoryProvider(memory_url))
    resumed = again.create_session(session.session_id)
    answer = again.run_sync("what did I say?", resumed)
    assert answer.text == reply(5, "remember the number 42", "what did I say?")
    assert len(open_store(memory_url).read(session.session_id)) == 6


def test_resume_by_session_id_on_sqlite(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("chatkeep.sqlite", reason="chatkeep-sqlite is not importable here")
    monkeypatch.setenv("CHATKEEP_PLUGINS", "sqlite")
    reset_plugins()
    url = "sqlite:///" + str(tmp_path / "history.db")
    first_store = open_store(url)
    first = Agent(OfflineChatClient(), history_provider=HistoryProvider(first_store))
    session = first.create_session()
    first.run_sync("remember 42", session)
    first_store.close()

    second_store = open_store(url)
    try:
        again = Agent(OfflineChatClient(), history_provider=HistoryProvider(second_store))
        answer = again.run_sync("what number?", AgentSession(session.session_id))
        assert answer.text == reply(3, "remember 42", "what number?")
        assert len(second_store.read(session.session_id)) == 4
    finally:
        second_store.close()


def test_max_messages_tail_load_through_the_agent(counting_store: MakeStore) -> None:
    store, backend = counting_store()
    agent = Agent(OfflineChatClient(), history_provider=HistoryProvider(store, max_messages=4))
    session = agent.create_session()
    for i in range(6):
        agent.run_sync(f"q{i}", session)
    assert len(store.read(session.session_id)) == 12
    backend.reads.clear()
    # A session resumed by id reads the window of four, nothing more.
    resumed = AgentSession(session.session_id)
    answer = agent.run_sync("last", resumed)
    assert answer.text.startswith("[seen 5]")
    assert backend.reads == [(session.session_id, -4, None, 4)]
    # The session kept since: a tail read of the last turn and the record before it
    # proves its cached window current.
    backend.reads.clear()
    answer = agent.run_sync("again", resumed)
    assert answer.text.startswith("[seen 5]")
    assert backend.reads == [(session.session_id, -3, None, 3)]


# -- service-managed history ------------------------------------------------------------------


def test_service_managed_conversation_sends_only_new_input() -> None:
    client = OfflineChatClient(service_managed=True)
    agent = Agent(client)
    session = agent.create_session()
    for i in range(5):
        answer = agent.run_sync(f"q{i}", session)
        assert answer.text == reply(2 * i + 1, "q0", f"q{i}")  # the service remembers
    assert session.conversation_id is not None
    assert session.conversation_id.startswith("conv_")
    assert session.is_service_managed
    assert [len(request) for request in client.requests] == [1] * 5  # constant size
    assert agent.history_provider is None  # nothing kept locally
    assert session.to_dict()["state"] == {}
    resumed = agent.deserialize_session(json.loads(json.dumps(agent.serialize_session(session))))
    assert resumed.conversation_id == session.conversation_id
    assert agent.run_sync("more", resumed).text == reply(11, "q0", "more")


def test_configured_provider_is_bypassed_with_a_warning_when_the_service_keeps_history(
    counting_store: MakeStore,
) -> None:
    store, backend = counting_store()
    client = OfflineChatClient(service_managed=True)
    agent = Agent(client, history_provider=HistoryProvider(store))
    session = agent.create_session()
    with pytest.warns(UserWarning, match="keeps the conversation itself"):
        agent.run_sync("hello", session)
    assert session.conversation_id is not None
    assert backend.appends == []
    reads = len(backend.reads)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        agent.run_sync("again", session)
    assert len(backend.reads) == reads  # the store is no longer consulted
    assert backend.appends == []
    assert store.read(session.session_id) == []
    assert [len(request) for request in client.requests] == [1, 1]


# -- no provider configured: the in-memory provider ----------------------------------------------


def test_in_memory_provider_is_created_on_first_client_managed_run() -> None:
    client = OfflineChatClient()
    agent = Agent(client)
    session = agent.create_session()
    agent.run_sync("first", session)
    provider = agent.get_service(HistoryProvider)
    assert isinstance(provider, InMemoryHistoryProvider)
    assert agent.run_sync("second", session).text == reply(3, "first", "second")
    # The history lives in the session's state, not in the provider.
    stored = asyncio.run(provider.messages(session))
    assert texts(stored)[0::2] == ["first", "second"]
    other = agent.create_session()
    assert agent.run_sync("elsewhere", other).text == reply(1, "elsewhere", "elsewhere")


def test_in_memory_history_survives_serialization_with_the_same_agent() -> None:
    agent = Agent(OfflineChatClient())
    session = agent.create_session()
    agent.run_sync(Message("user", [DataContent(b"\x00\xff", "image/png")]), session)
    agent.run_sync("second", session)
    data = json.loads(json.dumps(agent.serialize_session(session)))
    resumed = agent.deserialize_session(data)
    assert resumed.session_id == session.session_id
    answer = agent.run_sync("third", resumed)
    assert answer.text.startswith("[seen 5]")
    provider = agent.get_service(InMemoryHistoryProvider)
    assert provider is not None
    stored = asyncio.run(provider.messages(resumed))
    assert len(stored) == 6
    assert stored[0].contents == [DataContent(b"\x00\xff", "image/png")]


def test_in_memory_history_survives_serialization_into_a_fresh_agent() -> None:
    agent = Agent(OfflineChatClient())
    session = agent.create_session()
    agent.run_sync("first", session)
    agent.run_sync("second", session)
    data = json.loads(json.dumps(agent.serialize_session(session)))

    # A new process: a fresh agent with no provider configured, and the serialized session.
    fresh = Agent(OfflineChatClient())
    resumed = fresh.deserialize_session(data)
    answer = fresh.run_sync("third", resumed)
    assert answer.text == reply(5, "first", "third")
