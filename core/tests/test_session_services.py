"""AgentSession.get_service(type, key) and per-slot serializers on ProviderSessionState,
as the seed design (MAF's AgentSession.GetService and ProviderSessionState's own
serializer options) has them."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass

import pytest

from chatkeep.core import (
    Agent,
    AgentSession,
    HistoryProvider,
    InMemoryHistoryProvider,
    OfflineChatClient,
    ProviderSessionState,
    StateBag,
)
from chatkeep.core.session import StateSerializer


@dataclass
class Preferences:
    """Deliberately not registered with register_state_type."""

    language: str
    units: str = "metric"


PREFS = StateSerializer[Preferences](
    to_json=lambda p: {"language": p.language, "units": p.units},
    from_json=lambda data: Preferences(**data),
)


def through_json(session: AgentSession) -> AgentSession:
    return AgentSession.from_dict(json.loads(json.dumps(session.to_dict())))


# -- per-slot serializers -------------------------------------------------------------------


def test_a_slot_with_its_own_serializer_round_trips_an_unregistered_type() -> None:
    slot = ProviderSessionState("prefs", lambda _s: Preferences("en"), serializer=PREFS)
    session = AgentSession("s1")
    prefs = slot.get_or_initialize(session)
    prefs.language = "nb"
    slot.save(session, prefs)

    data = session.to_dict()
    assert data["state"]["prefs"] == {
        "$type": "chatkeep.slot",
        "value": {"language": "nb", "units": "metric"},
    }
    restored = through_json(session)
    assert slot.get_or_initialize(restored) == Preferences("nb")
    assert restored.state.get("prefs", Preferences) == Preferences("nb")  # decoded once


def test_without_a_serializer_an_unregistered_type_still_refuses_to_serialize() -> None:
    slot = ProviderSessionState("prefs", lambda _s: Preferences("en"))
    session = AgentSession("s1")
    slot.get_or_initialize(session)
    with pytest.raises(TypeError, match="register_state_type"):
        session.to_dict()


def test_an_encoded_slot_survives_being_passed_on_by_code_that_cannot_decode_it() -> None:
    slot = ProviderSessionState("prefs", lambda _s: Preferences("en"), serializer=PREFS)
    session = AgentSession("s1")
    slot.save(session, Preferences("de", "imperial"))
    # A process that does not know the slot reads the JSON form and passes it on unchanged.
    middle = through_json(session)
    assert middle.state.get("prefs") == {"language": "de", "units": "imperial"}
    assert middle.state.copy() == middle.state
    again = through_json(middle)
    assert slot.get_or_initialize(again) == Preferences("de", "imperial")


def test_a_slot_serializer_json_may_hold_the_type_marker_key() -> None:
    odd = StateSerializer[dict[str, str]](
        to_json=lambda d: {"$type": d["kind"], "n": d["n"]},
        from_json=lambda data: {"kind": data["$type"], "n": data["n"]},
    )
    slot = ProviderSessionState("odd", lambda _s: {"kind": "x", "n": "1"}, serializer=odd)
    session = AgentSession("s1")
    slot.get_or_initialize(session)
    assert slot.get_or_initialize(through_json(session)) == {"kind": "x", "n": "1"}


def test_setting_a_key_without_its_serializer_drops_it() -> None:
    bag = StateBag()
    bag.set("prefs", Preferences("en"), serializer=PREFS)
    assert bag.to_dict()["prefs"]["$type"] == "chatkeep.slot"
    bag.set("prefs", {"plain": True})
    assert bag.to_dict() == {"prefs": {"plain": True}}
    bag.set("prefs", Preferences("en"), serializer=PREFS)
    bag.remove("prefs")
    bag.set("prefs", 3)
    assert bag.to_dict() == {"prefs": 3}


def test_concurrent_first_reads_of_an_encoded_slot_decode_it_once() -> None:
    calls: list[object] = []

    def decode(data: object) -> Preferences:
        calls.append(data)
        return Preferences("fr")

    counting = StateSerializer[Preferences](to_json=PREFS.to_json, from_json=decode)
    slot = ProviderSessionState("prefs", lambda _s: Preferences("en"), serializer=counting)
    session = AgentSession("s1")
    slot.save(session, Preferences("fr"))
    restored = through_json(session)
    seen: list[Preferences] = []
    threads = [
        threading.Thread(target=lambda: seen.append(slot.get_or_initialize(restored)))
        for _ in range(8)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(calls) == 1 and len({id(p) for p in seen}) == 1


# -- get_service ------------------------------------------------------------------------------


def test_a_session_offers_itself_its_state_and_its_slots_by_key() -> None:
    session = AgentSession("s1")
    assert session.get_service(AgentSession) is session
    assert session.get_service(StateBag) is session.state
    assert session.get_service(Agent) is None
    slot = ProviderSessionState("prefs", lambda _s: Preferences("en"), serializer=PREFS)
    prefs = slot.get_or_initialize(session)
    assert session.get_service(Preferences, "prefs") is prefs
    assert session.get_service(Preferences, "missing") is None
    assert session.get_service(dict, "prefs") is None  # of another type


def test_a_session_subclass_adds_what_it_wraps() -> None:
    class Wrapped(AgentSession):
        __slots__ = ("native",)

        def __init__(self, native: object) -> None:
            super().__init__()
            self.native = native

        def get_service(self, service_type, key=None):  # type: ignore[no-untyped-def]
            if key is None and isinstance(self.native, service_type):
                return self.native
            return super().get_service(service_type, key)

    session = Wrapped(native=Preferences("en"))
    assert session.get_service(Preferences) is session.native
    assert session.get_service(StateBag) is session.state


def test_the_history_providers_slots_are_reachable_through_the_session() -> None:
    agent = Agent(OfflineChatClient(), history_provider=InMemoryHistoryProvider())
    session = agent.create_session()
    agent.run_sync("hello", session)
    stored = session.get_service(list, "in_memory.messages")
    assert stored is not None and stored[0]["contents"][0]["text"] == "hello"


def test_an_agent_tells_providers_of_one_type_apart_by_source_id() -> None:
    first = HistoryProvider("memory://", source_id="main")
    agent = Agent(OfflineChatClient(), history_provider=first)
    assert agent.get_service(HistoryProvider) is first
    assert agent.get_service(HistoryProvider, "main") is first
    assert agent.get_service(HistoryProvider, "audit") is None
    assert agent.get_service(Agent) is agent
