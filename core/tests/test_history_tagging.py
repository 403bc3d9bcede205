"""Loaded history is tagged without copying when the provider decoded it itself, and as
copies whenever someone else may hold the messages (a subclass's load, a reducer, a
filter): the caller's and the store's messages are never tagged in place."""

from __future__ import annotations

import asyncio

from chatkeep.core import (
    AgentSession,
    HistoryProvider,
    Message,
    MessageSource,
    open_store,
)
from chatkeep.core.history import encode_records


def _provider_with_history(**options: object) -> HistoryProvider:
    store = open_store("memory://")
    messages = [Message.user("hi", message_id="m1"), Message.assistant("hello", message_id="m2")]
    store.append("s", encode_records(messages))
    return HistoryProvider(store, **options)  # type: ignore[arg-type]


def test_each_load_hands_out_its_own_tagged_messages_and_stores_no_tag() -> None:
    provider = _provider_with_history(max_messages=50)
    session = AgentSession("s")
    first = asyncio.run(provider.invoking(session, []))
    assert [m.source for m in first] == [MessageSource.CHAT_HISTORY] * 2
    assert {m.source_id for m in first} == {provider.source_id}
    first[0].additional_properties.clear()
    first[0].contents.clear()
    second = asyncio.run(provider.invoking(session, []))
    assert second[0].source is MessageSource.CHAT_HISTORY
    assert second[0].text == "hi"
    assert all(b"_attribution" not in record.data for record in provider.store.read("s"))


class _Kept(HistoryProvider):
    """A provider whose load returns messages it keeps."""

    def __init__(self) -> None:
        super().__init__(open_store("memory://"))
        self.kept = [Message.user("kept", message_id="k1")]

    async def load(self, session: AgentSession) -> list[Message]:
        return self.kept


def test_messages_a_subclass_keeps_are_tagged_as_copies() -> None:
    provider = _Kept()
    loaded = asyncio.run(provider.invoking(AgentSession("s"), []))
    assert loaded[0].source is MessageSource.CHAT_HISTORY
    assert loaded[0] is not provider.kept[0]
    assert provider.kept[0].source is MessageSource.EXTERNAL
    assert provider.kept[0].additional_properties == {}


def test_a_filter_s_messages_are_tagged_as_copies() -> None:
    seen: list[Message] = []

    def remember(messages: object) -> list[Message]:
        seen.extend(messages)  # type: ignore[call-overload]
        return list(seen)

    provider = _provider_with_history(output_filter=remember)
    loaded = asyncio.run(provider.invoking(AgentSession("s"), []))
    assert [m.source for m in loaded] == [MessageSource.CHAT_HISTORY] * 2
    assert [m.source for m in seen] == [MessageSource.EXTERNAL] * 2


def test_a_resumed_whole_history_load_tags_each_message_in_its_own_dicts() -> None:
    # Longer than what a new session object caches, so the decoded messages are tagged in
    # place: no two may share a properties dict, a tag or a contents list, the storage time
    # is out, and properties a message was stored with stay beside the tag.
    store = open_store("memory://")
    provider = HistoryProvider(store)
    messages = [Message.user(f"m{n}", message_id=f"id{n}") for n in range(300)]
    messages[7] = Message.user("kept", message_id="id7", additional_properties={"k": [1]})
    asyncio.run(provider.save(AgentSession("s"), messages))
    loaded = asyncio.run(provider.invoking(AgentSession("s"), []))
    assert [m.message_id for m in loaded] == [f"id{n}" for n in range(300)]
    assert all(m.source is MessageSource.CHAT_HISTORY for m in loaded)
    assert all(set(m.additional_properties) == {"_attribution"} for m in loaded if m.text != "kept")
    assert loaded[7].additional_properties["k"] == [1]
    for attribute in ("additional_properties", "contents"):
        assert len({id(getattr(m, attribute)) for m in loaded}) == 300
    assert len({id(m.additional_properties["_attribution"]) for m in loaded}) == 300
    loaded[0].additional_properties["_attribution"]["source_id"] = "changed"
    assert loaded[1].source_id == provider.source_id
    again = asyncio.run(provider.invoking(AgentSession("s"), []))
    assert again[0].source_id == provider.source_id
