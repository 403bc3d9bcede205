"""Strands' own session tests, case by case, against ``ChatkeepSessionRepository`` on
SQLite, PostgreSQL and Redis (the ``store`` fixture), and once on S3, Azure Blob and behind
the encryption wrapper.

Mirrored (not copied) from strands-agents/sdk-python:

- ``tests/strands/session/test_file_session_manager.py`` (``File``): the repository
  contract as the file session manager implements it (the cases about files on disk,
  symlinks and path checks have no counterpart in a chatkeep store and are left out);
- ``tests/strands/session/test_repository_session_manager.py`` (``Repo``): a
  ``RepositorySessionManager`` over the repository, the repository in place of the mock.
"""

from __future__ import annotations

import uuid
from typing import Any
from unittest.mock import Mock

import pytest
from strands.agent.agent import Agent
from strands.agent.conversation_manager.null_conversation_manager import NullConversationManager
from strands.agent.conversation_manager.sliding_window_conversation_manager import (
    SlidingWindowConversationManager,
)
from strands.agent.conversation_manager.summarizing_conversation_manager import (
    SummarizingConversationManager,
)
from strands.interrupt import _InterruptState
from strands.session.repository_session_manager import RepositorySessionManager
from strands.types.content import ContentBlock
from strands.types.exceptions import SessionException
from strands.types.session import Session, SessionAgent, SessionMessage, SessionType

from chatkeep.core import Store, open_store
from chatkeep.encrypted import Keyring
from chatkeep.strands import ChatkeepSessionRepository


@pytest.fixture
def repository(store: Store) -> ChatkeepSessionRepository:
    return ChatkeepSessionRepository(store=store)


@pytest.fixture
def sample_session() -> Session:
    return Session(
        session_id=f"test-session-{uuid.uuid4().hex[:8]}", session_type=SessionType.AGENT
    )


@pytest.fixture
def sample_agent() -> SessionAgent:
    return SessionAgent(
        agent_id="test-agent",
        state={"key": "value"},
        conversation_manager_state=NullConversationManager().get_state(),
    )


@pytest.fixture
def sample_message() -> SessionMessage:
    return SessionMessage.from_message(
        message={"role": "user", "content": [ContentBlock(text="Hello world")]}, index=0
    )


def _messages(count: int) -> list[SessionMessage]:
    return [
        SessionMessage(
            message={"role": "user", "content": [ContentBlock(text=f"Message {i}")]},
            message_id=i,
        )
        for i in range(count)
    ]


# -- File: test_file_session_manager.py ------------------------------------------------------


def test_create_and_read_session(
    repository: ChatkeepSessionRepository, sample_session: Session
) -> None:
    """File::test_create_session, test_read_session."""
    assert repository.create_session(sample_session) is sample_session
    result = repository.read_session(sample_session.session_id)
    assert result is not None
    assert result.session_id == sample_session.session_id
    assert result.session_type == sample_session.session_type == SessionType.AGENT
    assert result.created_at == sample_session.created_at


def test_create_existing_session_raises(
    repository: ChatkeepSessionRepository, sample_session: Session
) -> None:
    """FileSessionManager.create_session refuses an existing session."""
    repository.create_session(sample_session)
    with pytest.raises(SessionException, match="already exists"):
        repository.create_session(sample_session)


def test_read_nonexistent_session(repository: ChatkeepSessionRepository) -> None:
    """File::test_read_nonexistent_session."""
    assert repository.read_session(f"nonexistent-{uuid.uuid4().hex}") is None


def test_delete_session(
    repository: ChatkeepSessionRepository,
    sample_session: Session,
    sample_agent: SessionAgent,
    sample_message: SessionMessage,
) -> None:
    """File::test_delete_session (with an agent and a message: all of it goes)."""
    repository.create_session(sample_session)
    repository.create_agent(sample_session.session_id, sample_agent)
    repository.create_message(sample_session.session_id, sample_agent.agent_id, sample_message)
    repository.delete_session(sample_session.session_id)
    assert repository.read_session(sample_session.session_id) is None
    assert repository.read_agent(sample_session.session_id, sample_agent.agent_id) is None
    assert repository.list_messages(sample_session.session_id, sample_agent.agent_id) == []


def test_delete_nonexistent_session(repository: ChatkeepSessionRepository) -> None:
    """File::test_delete_nonexistent_session."""
    with pytest.raises(SessionException, match="does not exist"):
        repository.delete_session(f"nonexistent-{uuid.uuid4().hex}")


def test_create_and_read_agent(
    repository: ChatkeepSessionRepository, sample_session: Session, sample_agent: SessionAgent
) -> None:
    """File::test_create_agent, test_read_agent."""
    repository.create_session(sample_session)
    repository.create_agent(sample_session.session_id, sample_agent)
    result = repository.read_agent(sample_session.session_id, sample_agent.agent_id)
    assert result is not None
    assert result.agent_id == sample_agent.agent_id and result.state == sample_agent.state
    assert result == sample_agent, "every field round-trips"


def test_read_nonexistent_agent(
    repository: ChatkeepSessionRepository, sample_session: Session
) -> None:
    """File::test_read_nonexistent_agent."""
    assert repository.read_agent(sample_session.session_id, "nonexistent_agent") is None


def test_update_agent(
    repository: ChatkeepSessionRepository, sample_session: Session, sample_agent: SessionAgent
) -> None:
    """File::test_update_agent (created_at kept, as the file manager keeps it)."""
    repository.create_session(sample_session)
    repository.create_agent(sample_session.session_id, sample_agent)
    created = sample_agent.created_at
    sample_agent.state = {"updated": "value", "raw": b"\x00\xff", "nested": {"n": [1, 2.5, None]}}
    sample_agent.created_at = "later"
    repository.update_agent(sample_session.session_id, sample_agent)
    result = repository.read_agent(sample_session.session_id, sample_agent.agent_id)
    assert result is not None
    assert result.state == {"updated": "value", "raw": b"\x00\xff", "nested": {"n": [1, 2.5, None]}}
    assert result.created_at == created


def test_update_nonexistent_agent(
    repository: ChatkeepSessionRepository, sample_session: Session, sample_agent: SessionAgent
) -> None:
    """File::test_update_nonexistent_agent."""
    repository.create_session(sample_session)
    with pytest.raises(SessionException):
        repository.update_agent(sample_session.session_id, sample_agent)


def test_create_and_read_message(
    repository: ChatkeepSessionRepository,
    sample_session: Session,
    sample_agent: SessionAgent,
    sample_message: SessionMessage,
) -> None:
    """File::test_create_message, test_read_message (two messages, the second read)."""
    repository.create_session(sample_session)
    repository.create_agent(sample_session.session_id, sample_agent)
    repository.create_message(sample_session.session_id, sample_agent.agent_id, sample_message)
    sample_message.message_id = sample_message.message_id + 1
    repository.create_message(sample_session.session_id, sample_agent.agent_id, sample_message)
    result = repository.read_message(
        sample_session.session_id, sample_agent.agent_id, sample_message.message_id
    )
    assert result is not None and result.message_id == sample_message.message_id
    assert result.message["role"] == sample_message.message["role"]
    assert result.message["content"] == sample_message.message["content"]
    assert result == sample_message, "every field round-trips"


def test_read_nonexistent_message(
    repository: ChatkeepSessionRepository, sample_session: Session, sample_agent: SessionAgent
) -> None:
    """File::test_read_messages_with_new_agent, test_read_nonexistent_message."""
    assert repository.read_message(sample_session.session_id, sample_agent.agent_id, 999) is None
    repository.create_session(sample_session)
    repository.create_agent(sample_session.session_id, sample_agent)
    assert repository.read_message(sample_session.session_id, sample_agent.agent_id, 999) is None


@pytest.mark.parametrize(
    ("limit", "offset", "expected"),
    [(None, 0, range(10)), (3, 0, range(3)), (None, 5, range(5, 10)), (2, 4, range(4, 6)),
     (None, 10, range(0)), (5, 8, range(8, 10))],
)  # fmt: skip
def test_list_messages(
    repository: ChatkeepSessionRepository,
    sample_session: Session,
    sample_agent: SessionAgent,
    limit: int | None,
    offset: int,
    expected: range,
) -> None:
    """File::test_list_messages_all, _with_limit, _with_offset (and both)."""
    repository.create_session(sample_session)
    repository.create_agent(sample_session.session_id, sample_agent)
    for message in _messages(10):
        repository.create_message(sample_session.session_id, sample_agent.agent_id, message)
    result = repository.list_messages(
        sample_session.session_id, sample_agent.agent_id, limit=limit, offset=offset
    )
    assert [m.message_id for m in result] == list(expected)
    assert [m.message["content"][0]["text"] for m in result] == [f"Message {i}" for i in expected]


def test_list_messages_with_new_agent(
    repository: ChatkeepSessionRepository, sample_session: Session, sample_agent: SessionAgent
) -> None:
    """File::test_list_messages_with_new_agent."""
    repository.create_session(sample_session)
    repository.create_agent(sample_session.session_id, sample_agent)
    assert repository.list_messages(sample_session.session_id, sample_agent.agent_id) == []


def test_update_message(
    repository: ChatkeepSessionRepository,
    sample_session: Session,
    sample_agent: SessionAgent,
    sample_message: SessionMessage,
) -> None:
    """File::test_update_message (created_at kept; the log keeps the original)."""
    repository.create_session(sample_session)
    repository.create_agent(sample_session.session_id, sample_agent)
    repository.create_message(sample_session.session_id, sample_agent.agent_id, sample_message)
    created = sample_message.created_at
    sample_message.message["content"] = [ContentBlock(text="Updated content")]
    sample_message.created_at = "later"
    repository.update_message(sample_session.session_id, sample_agent.agent_id, sample_message)
    result = repository.read_message(
        sample_session.session_id, sample_agent.agent_id, sample_message.message_id
    )
    assert result is not None and result.message["content"][0]["text"] == "Updated content"
    assert result.created_at == created
    listed = repository.list_messages(sample_session.session_id, sample_agent.agent_id)
    assert [m.message["content"][0]["text"] for m in listed] == ["Updated content"]


def test_update_nonexistent_message(
    repository: ChatkeepSessionRepository,
    sample_session: Session,
    sample_agent: SessionAgent,
    sample_message: SessionMessage,
) -> None:
    """File::test_update_nonexistent_message."""
    repository.create_session(sample_session)
    repository.create_agent(sample_session.session_id, sample_agent)
    with pytest.raises(SessionException):
        repository.update_message(sample_session.session_id, sample_agent.agent_id, sample_message)


def _multi_agent(state: dict[str, Any]) -> Mock:
    mock = Mock()
    mock.id = "test-multi-agent"
    mock.serialize_state.return_value = {"id": "test-multi-agent", "state": state}
    return mock


def test_multi_agent_state(repository: ChatkeepSessionRepository, sample_session: Session) -> None:
    """File::test_create_multi_agent, test_read_multi_agent, test_update_multi_agent and
    its nonexistent case."""
    repository.create_session(sample_session)
    with pytest.raises(SessionException):
        repository.update_multi_agent(sample_session.session_id, _multi_agent({}))
    repository.create_multi_agent(sample_session.session_id, _multi_agent({"key": "value"}))
    state = repository.read_multi_agent(sample_session.session_id, "test-multi-agent")
    assert state == {"id": "test-multi-agent", "state": {"key": "value"}}
    repository.update_multi_agent(sample_session.session_id, _multi_agent({"new": 1}))
    assert repository.read_multi_agent(sample_session.session_id, "test-multi-agent") == {
        "id": "test-multi-agent",
        "state": {"new": 1},
    }
    assert repository.read_multi_agent(sample_session.session_id, "other") is None


# -- Repo: test_repository_session_manager.py -------------------------------------------------


def _manager(repository: ChatkeepSessionRepository, session_id: str) -> RepositorySessionManager:
    return RepositorySessionManager(session_id=session_id, session_repository=repository)


def test_init_creates_session_if_not_exists(
    repository: ChatkeepSessionRepository, sample_session: Session
) -> None:
    """Repo::test_init_creates_session_if_not_exists."""
    assert repository.read_session(sample_session.session_id) is None
    _manager(repository, sample_session.session_id)
    session = repository.read_session(sample_session.session_id)
    assert session is not None and session.session_type == SessionType.AGENT


def test_init_uses_existing_session(
    repository: ChatkeepSessionRepository, sample_session: Session
) -> None:
    """Repo::test_init_uses_existing_session."""
    repository.create_session(sample_session)
    assert _manager(repository, sample_session.session_id).session == sample_session


def test_initialize_with_existing_agent_id(
    repository: ChatkeepSessionRepository, sample_session: Session
) -> None:
    """Repo::test_initialize_with_existing_agent_id and the unique-id check."""
    manager = _manager(repository, sample_session.session_id)
    agent = Agent(messages=[{"role": "user", "content": [{"text": "Hello!"}]}], agent_id="custom")
    manager.initialize(agent)
    stored = repository.read_agent(sample_session.session_id, "custom")
    assert stored is not None and stored.agent_id == "custom"
    listed = repository.list_messages(sample_session.session_id, "custom")
    assert [m.message for m in listed] == agent.messages
    with pytest.raises(SessionException, match="must be unique"):
        manager.initialize(Agent(agent_id="custom"))


def test_initialize_restores_existing_agent(
    repository: ChatkeepSessionRepository, sample_session: Session
) -> None:
    """Repo::test_initialize_restores_existing_agent (the manager made once the session
    exists: strands 1.62 reads no agent of a session it has just created)."""
    repository.create_session(sample_session)
    repository.create_agent(
        sample_session.session_id,
        SessionAgent(
            agent_id="existing-agent",
            state={"key": "value"},
            conversation_manager_state=SlidingWindowConversationManager().get_state(),
            _internal_state={
                "interrupt_state": {
                    "interrupts": {},
                    "context": {"test": "init"},
                    "activated": False,
                }
            },
        ),
    )
    repository.create_message(
        sample_session.session_id,
        "existing-agent",
        SessionMessage(
            message={"role": "user", "content": [ContentBlock(text="Hello")]}, message_id=0
        ),
    )
    agent = Agent(agent_id="existing-agent")
    _manager(repository, sample_session.session_id).initialize(agent)
    assert agent.state.get("key") == "value"
    assert (
        agent.messages[0]["role"] == "user" and agent.messages[0]["content"][0]["text"] == "Hello"
    )
    assert len(agent.messages) == 1
    assert agent._interrupt_state == _InterruptState(
        interrupts={}, context={"test": "init"}, activated=False
    )


def test_initialize_restores_with_summarizing_conversation_manager(
    repository: ChatkeepSessionRepository, sample_session: Session
) -> None:
    """Repo::test_initialize_restores_existing_agent_with_summarizing_conversation_manager
    (list_messages with the conversation manager's offset)."""
    repository.create_session(sample_session)
    conversation_manager = SummarizingConversationManager()
    conversation_manager.removed_message_count = 1
    conversation_manager._summary_message = {"role": "assistant", "content": [{"text": "summary"}]}
    repository.create_agent(
        sample_session.session_id,
        SessionAgent(
            agent_id="existing-agent",
            state={"key": "value"},
            conversation_manager_state=conversation_manager.get_state(),
        ),
    )
    message = SessionMessage(
        message={"role": "user", "content": [ContentBlock(text="Hello")]}, message_id=0
    )
    repository.create_message(sample_session.session_id, "existing-agent", message)
    message.message_id = 1
    repository.create_message(sample_session.session_id, "existing-agent", message)
    agent = Agent(agent_id="existing-agent", conversation_manager=SummarizingConversationManager())
    _manager(repository, sample_session.session_id).initialize(agent)
    assert agent.state.get("key") == "value"
    assert len(agent.messages) == 2
    assert agent.messages[0]["content"][0]["text"] == "summary"
    assert agent.messages[1]["content"][0]["text"] == "Hello"
    assert agent.conversation_manager.removed_message_count == 1


def test_append_message(repository: ChatkeepSessionRepository, sample_session: Session) -> None:
    """Repo::test_append_message."""
    manager = _manager(repository, sample_session.session_id)
    agent = Agent(agent_id="test-agent", session_manager=manager)
    manager.append_message({"role": "user", "content": [{"type": "text", "text": "Hello"}]}, agent)
    messages = repository.list_messages(sample_session.session_id, "test-agent")
    assert len(messages) == 1
    assert messages[0].message["role"] == "user"
    assert messages[0].message["content"][0]["text"] == "Hello"


# -- S3, Azure Blob, encrypted: once each -------------------------------------------------------


@pytest.mark.parametrize("backend", ["s3", "azure", "encrypted"])
def test_repository_on_object_stores_and_encrypted(
    backend: str, request: pytest.FixtureRequest, sqlite_url: str
) -> None:
    if backend == "encrypted":
        handle = open_store(f"encrypted+{sqlite_url}", keys=f"k1:{Keyring.generate_key()}")
    else:
        handle = open_store(request.getfixturevalue(f"{backend}_url"))
    try:
        repository = ChatkeepSessionRepository(store=handle)
        session = Session(session_id=f"s-{uuid.uuid4().hex[:8]}", session_type=SessionType.AGENT)
        repository.create_session(session)
        agent = SessionAgent(agent_id="a", state={"k": 1}, conversation_manager_state={})
        repository.create_agent(session.session_id, agent)
        for message in _messages(4):
            repository.create_message(session.session_id, "a", message)
        redacted = _messages(4)[3]
        redacted.redact_message = {"role": "user", "content": [{"text": "[redacted]"}]}
        repository.update_message(session.session_id, "a", redacted)
        listed = repository.list_messages(session.session_id, "a", offset=2)
        assert [m.to_message()["content"][0]["text"] for m in listed] == ["Message 2", "[redacted]"]
        assert listed[1].message["content"][0]["text"] == "Message 3", "the original is kept"
        assert repository.read_agent(session.session_id, "a") == agent
        repository.delete_session(session.session_id)
        assert repository.read_session(session.session_id) is None
    finally:
        handle.close()
