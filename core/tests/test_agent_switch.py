"""A session the service keeps is never silently restarted by a client that keeps nothing."""

from __future__ import annotations

import asyncio

import pytest

from chatkeep.core import Agent, HistoryProvider, OfflineChatClient, open_store
from chatkeep.core.errors import HistoryConflict


def test_client_managed_client_refuses_a_service_managed_session() -> None:
    service = OfflineChatClient(service_managed=True)
    agent = Agent(service)
    session = agent.create_session()
    agent.run_sync("Hi, I'm Ada.", session)
    agent.run_sync("I like Oslo.", session)
    assert session.conversation_id is not None

    store = open_store("memory://")
    local = OfflineChatClient()  # service_managed=False: keeps nothing on the service
    switched = Agent(local, history_provider=HistoryProvider(store))
    with pytest.raises(HistoryConflict, match="migrate_to_client_managed"):
        asyncio.run(switched.run("What's my name?", session))
    assert local.requests == []  # nothing was sent: the model never saw a partial history
    assert store.read(session.session_id) == []  # nothing stored locally either
    assert session.conversation_id is not None  # the session still points at the service


def test_clients_that_do_not_declare_it_keep_working() -> None:
    class Plain:
        def __init__(self) -> None:
            self.inner = OfflineChatClient(service_managed=True)

        def get_response(self, messages, *, conversation_id=None):  # type: ignore[no-untyped-def]
            return self.inner.get_response(messages, conversation_id=conversation_id)

    agent = Agent(Plain())
    session = agent.create_session()
    agent.run_sync("one", session)
    reply = agent.run_sync("two", session)
    assert reply.text.startswith("[seen 3]")
