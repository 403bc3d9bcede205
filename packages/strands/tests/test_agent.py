"""Strands itself over ``ChatkeepSessionManager``: an ``Agent`` with a scripted model and a
tool runs a multi-turn conversation on SQLite and PostgreSQL and a second process resumes
it; a guardrail redaction is an in-place edit; agent state and conversation-manager state
come back exactly; several agents in one session stay apart; ``list_messages`` reads what
it returns."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from typing import Any

import pytest
from strands import Agent, tool
from strands.agent.conversation_manager.sliding_window_conversation_manager import (
    SlidingWindowConversationManager,
)

from chatkeep.core import Store, read_view
from chatkeep.core.views import read_log
from chatkeep.strands import ChatkeepSessionManager, ChatkeepSessionRepository, agent_key

# The scripted model, shared with the resuming process (the script below runs it too).
MODEL_SOURCE = '''
import json
from typing import Any

from strands.models import Model


class ScriptedModel(Model):
    """A model that answers from a script: each turn is a list of content blocks (text,
    toolUse) or a redaction {"redact_user": ..., "text": ...}."""

    def __init__(self, script):
        self.script = list(script)
        self.seen = []

    def update_config(self, **model_config: Any) -> None:
        pass

    def get_config(self) -> Any:
        return {}

    async def structured_output(self, output_model, prompt, system_prompt=None, **kwargs):
        raise NotImplementedError
        yield

    async def stream(self, messages, tool_specs=None, system_prompt=None, **kwargs):
        self.seen.append([dict(m) for m in messages])
        turn = self.script.pop(0)
        yield {"messageStart": {"role": "assistant"}}
        stop = "end_turn"
        if isinstance(turn, dict):
            yield {"redactContent": {"redactUserContentMessage": turn["redact_user"]}}
            turn = [{"text": turn["text"]}]
            stop = "guardrail_intervened"
        for block in turn:
            if "toolUse" in block:
                stop = "tool_use"
                use = block["toolUse"]
                start = {"toolUse": {"name": use["name"], "toolUseId": use["toolUseId"]}}
                yield {"contentBlockStart": {"start": start}}
                arguments = {"input": json.dumps(use["input"])}
                yield {"contentBlockDelta": {"delta": {"toolUse": arguments}}}
            else:
                yield {"contentBlockStart": {"start": {}}}
                yield {"contentBlockDelta": {"delta": {"text": block["text"]}}}
            yield {"contentBlockStop": {}}
        yield {"messageStop": {"stopReason": stop}}
'''
namespace: dict[str, Any] = {}
exec(MODEL_SOURCE, namespace)  # our own helper source, run in both processes
ScriptedModel = namespace["ScriptedModel"]


@tool
def weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


def _agent(manager: ChatkeepSessionManager, script: list[Any], **kwargs: Any) -> Agent:
    return Agent(
        model=ScriptedModel(script),
        tools=[weather],
        session_manager=manager,
        callback_handler=None,
        **kwargs,
    )


RESUME = (
    "import json, sys\n"
    + MODEL_SOURCE
    + """
from strands import Agent
from chatkeep.strands import ChatkeepSessionManager

manager = ChatkeepSessionManager(sys.argv[2], url=sys.argv[1])
model = ScriptedModel([[{"text": "You asked about Oslo."}]])
agent = Agent(model=model, session_manager=manager, callback_handler=None)
before = len(agent.messages)
visits = agent.state.get("visits")
agent("What did I ask?")
print(json.dumps({"before": before, "visits": visits, "sent": len(model.seen[0])}))
"""
)


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_agent_with_a_tool_resumed_by_another_process(
    backend: str, request: pytest.FixtureRequest
) -> None:
    url: str = request.getfixturevalue(f"{backend}_url")
    session_id = f"s-{uuid.uuid4().hex[:8]}"
    manager = ChatkeepSessionManager(session_id, url=url)
    script = [
        [{"toolUse": {"toolUseId": "t1", "name": "weather", "input": {"city": "Oslo"}}}],
        [{"text": "It is sunny."}],
        [{"text": "Anything else?"}],
    ]
    agent = _agent(manager, script)
    agent.state.set("visits", 2)
    assert str(agent("Weather in Oslo?")).strip() == "It is sunny."
    agent("Thanks")
    messages = [dict(m) for m in agent.messages]
    assert len(messages) == 6
    stored = manager.repository.list_messages(session_id, "default")
    assert [m.to_message() for m in stored] == agent.messages, "stored exactly"
    manager.close()
    done = subprocess.run(
        [sys.executable, "-c", RESUME, url, session_id],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    resumed = json.loads(done.stdout.strip().splitlines()[-1])
    assert resumed == {"before": 6, "visits": 2, "sent": 7}
    repository = ChatkeepSessionRepository(url=url)
    listed = repository.list_messages(session_id, "default")
    assert [m.message_id for m in listed] == list(range(8))
    assert [m.message for m in listed[:6]] == messages
    view = read_view(repository.store, agent_key(session_id, "default"))
    assert [m.role for m in view] == ["user", "assistant", "user", "assistant"] * 2
    assert view[1].contents[0].name == "weather"  # type: ignore[union-attr]
    repository.close()


def test_guardrail_redaction_is_an_in_place_edit(store: Store) -> None:
    session_id = f"s-{uuid.uuid4().hex[:8]}"
    manager = ChatkeepSessionManager(session_id, store=store)
    agent = _agent(manager, [[{"text": "fine"}], {"redact_user": "[redacted]", "text": "Blocked."}])
    agent("hello")
    agent("something the guardrail stops")
    key = agent_key(session_id, "default")
    texts = [m.text for m in read_view(store, key)]
    assert texts == ["hello", "fine", "[redacted]", "Blocked."]
    kinds = [entry.kind for entry in read_log(store, key)]
    assert "chatkeep.splice" in kinds or "chatkeep.checkpoint" in kinds
    originals = [e.message.text for e in read_log(store, key) if e.message is not None]
    assert "something the guardrail stops" in originals, "the log keeps the original"
    restored = _agent(ChatkeepSessionManager(session_id, store=store), [])
    assert restored.messages == agent.messages
    listed = manager.repository.list_messages(session_id, "default")
    # Strands edits the agent's message in place before it redacts it, so the stored
    # SessionMessage's message and redact_message agree; the log has the original.
    assert listed[2].redact_message is not None
    assert listed[2].to_message()["content"] == [{"text": "[redacted]"}]


def test_state_and_conversation_manager_round_trip_exactly(store: Store) -> None:
    session_id = f"s-{uuid.uuid4().hex[:8]}"
    script = [[{"text": f"answer {i}"}] for i in range(4)]
    window = SlidingWindowConversationManager(window_size=4)
    agent = _agent(
        ChatkeepSessionManager(session_id, store=store), script, conversation_manager=window
    )
    agent.state.set("profile", {"name": "Ada", "tags": ["a", "b"], "score": 1.5, "n": None})
    for i in range(4):
        agent(f"question {i}")
    assert window.removed_message_count > 0
    restored_window = SlidingWindowConversationManager(window_size=4)
    restored = _agent(
        ChatkeepSessionManager(session_id, store=store), [], conversation_manager=restored_window
    )
    assert restored.state.get() == agent.state.get()
    assert restored_window.get_state() == window.get_state()
    assert restored.messages == agent.messages


def test_several_agents_in_one_session_stay_apart(store: Store) -> None:
    session_id = f"s-{uuid.uuid4().hex[:8]}"
    manager = ChatkeepSessionManager(session_id, store=store)
    one = _agent(manager, [[{"text": "one"}]], agent_id="one")
    two = _agent(manager, [[{"text": "two"}]], agent_id="two")
    one.state.set("who", "one")
    two.state.set("who", "two")
    one("hi one")
    two("hi two")
    again = ChatkeepSessionManager(session_id, store=store)
    one_back = _agent(again, [], agent_id="one")
    two_back = _agent(again, [], agent_id="two")
    assert one_back.messages == one.messages and two_back.messages == two.messages
    assert [m["content"][0]["text"] for m in one_back.messages] == ["hi one", "one"]
    assert one_back.state.get("who") == "one" and two_back.state.get("who") == "two"


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


def test_list_messages_reads_what_it_returns(store: Store) -> None:
    from strands.types.session import Session, SessionAgent, SessionMessage, SessionType

    session_id = f"s-{uuid.uuid4().hex[:8]}"
    repository = ChatkeepSessionRepository(store=store)
    repository.create_session(Session(session_id=session_id, session_type=SessionType.AGENT))
    repository.create_agent(
        session_id, SessionAgent(agent_id="a", state={}, conversation_manager_state={})
    )
    for i in range(600):
        message = {"role": "user", "content": [{"text": f"m{i}"}]}
        repository.create_message(session_id, "a", SessionMessage(message=message, message_id=i))
    counting = _Counting(store)
    with Store(counting, name="counting") as counted:
        listed = ChatkeepSessionRepository(store=counted).list_messages(session_id, "a", offset=590)
    assert [m.message_id for m in listed] == list(range(590, 600))
    assert counting.records <= 30, f"read {counting.records} records for 10 messages"
