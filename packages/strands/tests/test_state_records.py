"""Where the Strands adapter keeps sessions, agents and multi-agent state: the core's
``chatkeep.state`` records (views skip them), with sessions written the old way (messages of
role ``strands``) still read."""

from __future__ import annotations

import json
import math
import uuid
from typing import Any

from strands.types.session import Session, SessionAgent, SessionType

from chatkeep.core import Message, Record, Store, encode_records, new_id, read_view
from chatkeep.core.metadata import utc_stamp
from chatkeep.strands import ChatkeepSessionRepository, agent_key, session_key


def _old_state(kind: str, data: dict[str, Any]) -> list[Record]:
    """A state record as chatkeep-strands wrote it before ``chatkeep.state`` records."""
    message = Message("strands", [], None, new_id(), {"strands": {kind: data}})
    return list(encode_records([message], stored_at=utc_stamp()))


def test_state_is_kept_in_chatkeep_state_records(store: Store) -> None:
    session_id = f"s-{uuid.uuid4().hex[:8]}"
    repository = ChatkeepSessionRepository(store=store)
    repository.create_session(Session(session_id=session_id, session_type=SessionType.AGENT))
    state = {"nan": math.nan, "raw": {"__chatkeep__": 1}, "n": [1, 2.5, None]}
    agent = SessionAgent(agent_id="a", state=state, conversation_manager_state={"k": 1})
    repository.create_agent(session_id, agent)
    for key in (session_key(session_id), agent_key(session_id, "a") + "/state"):
        (record,) = store.read(key)
        raw = json.loads(record.data)
        assert (raw["type"], raw["owner"]) == ("chatkeep.state", "strands")
        assert read_view(store, key) == [], "no chatkeep reader sees state as a message"
    back = repository.read_agent(session_id, "a")
    assert back is not None
    assert math.isnan(back.state["nan"])
    assert back.state["raw"] == {"__chatkeep__": 1} and back.state["n"] == [1, 2.5, None]
    assert back.conversation_manager_state == {"k": 1}


def test_sessions_written_the_old_way_are_read(store: Store) -> None:
    session_id = f"s-{uuid.uuid4().hex[:8]}"
    session = Session(session_id=session_id, session_type=SessionType.AGENT)
    agent = SessionAgent(agent_id="a", state={"visits": 3}, conversation_manager_state={})
    store.append(session_key(session_id), _old_state("session", session.to_dict()))
    state_key = agent_key(session_id, "a") + "/state"
    store.append(state_key, _old_state("agent", agent.to_dict()))
    repository = ChatkeepSessionRepository(store=store)
    read = repository.read_session(session_id)
    assert read is not None and read.session_id == session_id
    assert read.session_type == SessionType.AGENT
    old = repository.read_agent(session_id, "a")
    assert old is not None and old.state == {"visits": 3}
    # An update on an old session appends a new-form record, which is read from then on,
    # keeping the agent's creation time.
    agent.state["visits"] = 4
    repository.update_agent(session_id, agent)
    new = repository.read_agent(session_id, "a")
    assert new is not None and new.state == {"visits": 4}
    assert new.created_at == old.created_at
    assert json.loads(store.read(state_key, -1)[0].data)["type"] == "chatkeep.state"
