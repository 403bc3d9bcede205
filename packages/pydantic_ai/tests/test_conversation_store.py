"""Pydantic AI's ``ConversationStore`` contract, checked against the adapter on every backend.

Pydantic AI 2.68 documents its store in ``pydantic_ai/conversation_store.py`` (``load``,
``load_entries``, ``save``, ``branch``, ``fork``, ``list_conversations``, ``delete`` and the
five primitives) and ships one implementation, ``InMemoryConversationStore``. Its own
test module for the store is not in the published sources, so each scenario below follows
one behaviour those docstrings state (named in the scenario's docstring) and runs twice:
on ``InMemoryConversationStore`` (the reference) and on :class:`ChatkeepConversationStore`
over a real backend; the two outcomes (results and exceptions, with store-minted ids
replaced by labels) must be identical. Direct assertions pin what the docstrings promise.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import replace
from datetime import datetime, timezone
from typing import Any

import pytest
from pydantic_ai.conversation import Conversation, ConversationTypeAdapter
from pydantic_ai.conversation_store import (
    ConversationConflict,
    ConversationEntry,
    ConversationRecord,
    ConversationStore,
    InMemoryConversationStore,
)
from pydantic_ai.exceptions import UserError
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    UserPromptPart,
)
from pydantic_ai.tools import DeferredToolRequests
from pydantic_ai.usage import RequestUsage, RunUsage

from chatkeep.pydantic_ai import ChatkeepConversationStore

pytestmark = pytest.mark.anyio

T0 = datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=timezone.utc)


def ask(text: str) -> ModelRequest:
    return ModelRequest(parts=[UserPromptPart(text, timestamp=T0)], timestamp=T0)


def answer(text: str) -> ModelResponse:
    return ModelResponse(
        parts=[TextPart(text)], usage=RequestUsage(input_tokens=3, output_tokens=2), timestamp=T0
    )


def turns(count: int, tag: str = "m") -> list[ModelMessage]:
    """``count`` alternating requests and responses."""
    return [ask(f"{tag}{n}") if n % 2 == 0 else answer(f"{tag}{n}") for n in range(count)]


class Labels:
    """Store-minted ids (entries, revisions) as labels in order of first sight, so two
    stores' outcomes compare."""

    def __init__(self) -> None:
        self._names: dict[str, str] = {}

    def __call__(self, value: str | None) -> str | None:
        if value is None:
            return None
        return self._names.setdefault(value, f"id{len(self._names)}")

    def entries(self, entries: list[ConversationEntry] | None) -> Any:
        if entries is None:
            return None
        return [(self(e.id), self(e.parent_id), e.message) for e in entries]

    def record(self, record: ConversationRecord | None) -> Any:
        if record is None:
            return None
        return (
            record.conversation_id,
            self(record.head_id),
            record.usage,
            record.deferred_tool_requests,
            record.scope,
            record.forked_from,
            self(record.forked_at),
            [self(tip) for tip in record.branches],
            self(record.revision),
        )

    def conversation(self, conversation: Conversation | None) -> Any:
        if conversation is None:
            return None
        return (
            conversation.messages,
            conversation.usage,
            conversation.conversation_id,
            conversation.deferred_tool_requests,
            self(conversation.revision),
            conversation.new_message_index,
        )


Scenario = Callable[[ConversationStore, Labels], Awaitable[Any]]


def fresh(store: ConversationStore) -> ConversationStore:
    """A store with nothing in it: the same chatkeep store under a new prefix."""
    if isinstance(store, ChatkeepConversationStore):
        return ChatkeepConversationStore(
            store=store.store, prefix=f"{store.prefix}{secrets.token_hex(3)}:"
        )
    return InMemoryConversationStore()


async def outcome(scenario: Scenario, store: ConversationStore) -> Any:
    labels = Labels()
    store = fresh(store)
    try:
        return ("returned", await scenario(store, labels))
    except (ConversationConflict, UserError, KeyError) as exc:
        return ("raised", type(exc).__name__)


async def same(store: ChatkeepConversationStore, scenario: Scenario) -> Any:
    """Run ``scenario`` on the reference and on ``store``; their outcomes must match."""
    expected = await outcome(scenario, InMemoryConversationStore())
    actual = await outcome(scenario, store)
    assert actual == expected
    return actual[1]


async def same_but_kept(store: ChatkeepConversationStore, scenario: Scenario, kept: Any) -> Any:
    """:func:`same` where ``store`` can erase; on a store without ``delete`` the scenario's
    first result (what a delete released) must be ``kept``, nothing released (the README's
    promise), and the rest must match."""
    if store.store.supports("delete"):
        return await same(store, scenario)
    expected = await outcome(scenario, InMemoryConversationStore())
    actual = await outcome(scenario, store)
    assert actual[0] == expected[0] == "returned"
    assert actual[1][0] == kept and actual[1][1:] == expected[1][1:]
    return None


# -- load and save -------------------------------------------------------------------------


async def test_a_conversation_the_store_does_not_have(
    conversation_store: ChatkeepConversationStore,
) -> None:
    """``load``/``load_entries``: ``None`` if the store doesn't have it."""

    async def scenario(store: ConversationStore, labels: Labels) -> Any:
        return (
            await store.load("nope"),
            await store.load_entries("nope"),
            await store.read_record("nope"),
            await store.list_conversations(),
        )

    assert await same(conversation_store, scenario) == (None, None, None, [])


async def test_save_then_load(conversation_store: ChatkeepConversationStore) -> None:
    """``save`` stores the messages and returns their entries, in order; ``load`` gives the
    conversation back with its revision and ``new_message_index`` at the end."""

    async def scenario(store: ConversationStore, labels: Labels) -> Any:
        conversation = Conversation(
            messages=turns(4), conversation_id="c", usage=RunUsage(requests=2)
        )
        saved = await store.save(conversation)
        loaded = await store.load("c")
        assert loaded is not None and loaded.revision == conversation.revision
        assert [e.id for e in saved] == [e.id for e in (await store.load_entries("c") or [])]
        return labels.entries(saved), labels.conversation(loaded), conversation.new_message_index

    entries, loaded, index = await same(conversation_store, scenario)
    assert [parent for _, parent, _ in entries] == [None, *[e[0] for e in entries[:-1]]]
    assert loaded[0] == turns(4) and loaded[5] == 4 and index == 4


async def test_save_appends_only_the_new_messages(
    conversation_store: ChatkeepConversationStore,
) -> None:
    """``save`` of a loaded conversation appends the messages from ``new_message_index`` on."""

    async def scenario(store: ConversationStore, labels: Labels) -> Any:
        await store.save(Conversation(messages=turns(2), conversation_id="c"))
        loaded = await store.load("c")
        assert loaded is not None
        loaded.messages.extend(turns(2, "n"))
        added = await store.save(loaded)
        again = await store.save(loaded)  # nothing new
        return labels.entries(added), again, labels.conversation(await store.load("c"))

    added, again, loaded = await same(conversation_store, scenario)
    assert len(added) == 2 and again == [] and loaded[0] == turns(2) + turns(2, "n")


async def test_an_empty_conversation_is_stored(
    conversation_store: ChatkeepConversationStore,
) -> None:
    """A conversation with no messages has a record (``head_id`` ``None``) and loads."""

    async def scenario(store: ConversationStore, labels: Labels) -> Any:
        await store.save(Conversation(conversation_id="c"))
        return labels.conversation(await store.load("c")), labels.record(
            await store.read_record("c")
        )

    loaded, record = await same(conversation_store, scenario)
    assert loaded[0] == [] and record[1] is None


async def test_a_stale_save_conflicts(conversation_store: ChatkeepConversationStore) -> None:
    """``save`` raises ``ConversationConflict`` if the conversation was saved since it was
    loaded; nothing of the losing save is stored."""

    async def scenario(store: ConversationStore, labels: Labels) -> Any:
        await store.save(Conversation(messages=turns(2), conversation_id="c"))
        first, second = await store.load("c"), await store.load("c")
        assert first is not None and second is not None
        first.messages.append(ask("first"))
        second.messages.append(ask("second"))
        await store.save(first)
        try:
            await store.save(second)
        except ConversationConflict as exc:
            assert exc.conversation_id == "c"
            return labels.conversation(await store.load("c"))
        raise AssertionError("no conflict")

    loaded = await same(conversation_store, scenario)
    assert loaded[0] == [*turns(2), ask("first")]


async def test_a_new_conversation_under_a_stored_id_conflicts(
    conversation_store: ChatkeepConversationStore,
) -> None:
    """``save`` raises ``ConversationConflict`` when one with its id already exists and it
    wasn't loaded from the store."""

    async def scenario(store: ConversationStore, labels: Labels) -> Any:
        await store.save(Conversation(messages=turns(2), conversation_id="c"))
        await store.save(Conversation(messages=turns(2, "x"), conversation_id="c"))

    assert await outcome(scenario, conversation_store) == ("raised", "ConversationConflict")
    await same(conversation_store, scenario)


async def test_a_conversation_serialized_and_continued(
    conversation_store: ChatkeepConversationStore,
) -> None:
    """Without a usable ``new_message_index`` (the conversation went through
    ``ConversationTypeAdapter``) ``save`` compares with the stored messages and appends
    what extends them."""

    async def scenario(store: ConversationStore, labels: Labels) -> Any:
        conversation = Conversation(messages=turns(3), conversation_id="c")
        await store.save(conversation)
        copy = ConversationTypeAdapter.validate_json(
            ConversationTypeAdapter.dump_json(conversation)
        )
        copy.messages.append(answer("more"))
        added = await store.save(copy)
        return labels.entries(added), labels.conversation(await store.load("c"))

    added, loaded = await same(conversation_store, scenario)
    assert len(added) == 1 and loaded[0] == [*turns(3), answer("more")]


async def test_load_a_window(conversation_store: ChatkeepConversationStore) -> None:
    """``load(limit=)`` loads the last ``limit`` messages; saving the result still appends
    to the whole stored conversation; a negative limit is a ``UserError``."""

    async def scenario(store: ConversationStore, labels: Labels) -> Any:
        await store.save(Conversation(messages=turns(5), conversation_id="c"))
        window = await store.load("c", limit=2)
        assert window is not None
        window.messages.append(answer("next"))
        await store.save(window)
        entries = await store.load_entries("c", limit=3)
        return (
            labels.conversation(window),
            labels.conversation(await store.load("c")),
            labels.entries(entries),
        )

    window, whole, entries = await same(conversation_store, scenario)
    assert window[0] == [*turns(5)[-2:], answer("next")]
    assert whole[0] == [*turns(5), answer("next")] and len(entries) == 3

    async def negative(store: ConversationStore, labels: Labels) -> Any:
        await store.save(Conversation(messages=turns(1), conversation_id="c"))
        return await store.load("c", limit=-1)

    assert await outcome(negative, conversation_store) == ("raised", "UserError")
    await same(conversation_store, negative)


# -- scope ---------------------------------------------------------------------------------


async def test_scope_keeps_owners_apart(conversation_store: ChatkeepConversationStore) -> None:
    """A conversation saved with another scope is treated as one the store doesn't have:
    ``load``, ``save``, ``delete``, ``branch``, ``fork`` and listing all respect it."""

    async def scenario(store: ConversationStore, labels: Labels) -> Any:
        await store.save(Conversation(messages=turns(2), conversation_id="c"), scope="alice")
        await store.save(Conversation(messages=turns(2), conversation_id="d"), scope="bob")
        seen = (
            labels.conversation(await store.load("c", scope="bob")),
            labels.conversation(await store.load("c", scope="alice")),
            [r.conversation_id for r in await store.list_conversations(scope="alice")],
            [r.conversation_id for r in await store.list_conversations(scope="carol")],
        )
        await store.delete("c", scope="bob")  # not bob's: left as it is
        still = await store.load("c")
        assert still is not None
        conflict = None
        try:
            await store.save(still, scope="bob")
        except ConversationConflict:
            conflict = "ConversationConflict"
        fork = None
        try:
            await store.fork("c", source_scope="bob")
        except UserError:
            fork = "UserError"
        return seen, labels.conversation(still), conflict, fork

    seen, still, conflict, fork = await same(conversation_store, scenario)
    assert seen[0] is None and seen[2] == ["c"] and seen[3] == []
    assert still[0] == turns(2) and conflict == "ConversationConflict" and fork == "UserError"


# -- listing -------------------------------------------------------------------------------


async def test_list_conversations_newest_first(
    conversation_store: ChatkeepConversationStore,
) -> None:
    """``list_conversations``: most recently saved first, at most ``limit``; a negative
    limit is a ``UserError``."""

    async def scenario(store: ConversationStore, labels: Labels) -> Any:
        for name in ("a", "b", "c"):
            await store.save(Conversation(messages=turns(1), conversation_id=name))
            await asyncio.sleep(0.002)
        first = [r.conversation_id for r in await store.list_conversations()]
        loaded = await store.load("a")
        assert loaded is not None
        loaded.messages.append(answer("later"))
        await store.save(loaded)
        return (
            first,
            [r.conversation_id for r in await store.list_conversations()],
            [r.conversation_id for r in await store.list_conversations(limit=2)],
            await store.list_conversations(limit=0),
            [labels.record(r) for r in await store.read_records(limit=1)],
        )

    first, second, two, none, top = await same(conversation_store, scenario)
    assert first == ["c", "b", "a"] and second == ["a", "c", "b"] and two == ["a", "c"]
    assert none == [] and top[0][0] == "a"

    async def negative(store: ConversationStore, labels: Labels) -> Any:
        return await store.list_conversations(limit=-1)

    assert await outcome(negative, conversation_store) == ("raised", "UserError")


# -- branch --------------------------------------------------------------------------------


async def test_branch_back_and_forth(conversation_store: ChatkeepConversationStore) -> None:
    """``branch(at=)`` keeps that many messages and records the history it leaves in
    ``branches``; ``branch(from_entry=)`` goes back to an entry of a branch it left; the
    next save goes on the branch."""

    async def scenario(store: ConversationStore, labels: Labels) -> Any:
        conversation = Conversation(messages=turns(4), conversation_id="c")
        entries = await store.save(conversation)
        assert conversation.revision is not None
        branched = await store.branch("c", at=2, expected_revision=conversation.revision)
        after_branch = labels.record(await store.read_record("c"))
        branched.messages.append(ask("instead"))
        await store.save(branched)
        on_branch = labels.conversation(await store.load("c"))
        assert branched.revision is not None
        back = await store.branch(
            "c", from_entry=entries[-1].id, expected_revision=branched.revision
        )
        return (
            labels.conversation(branched),
            after_branch,
            on_branch,
            labels.conversation(back),
            labels.record(await store.read_record("c")),
            labels.conversation(await store.load("c", limit=1)),
        )

    _, after_branch, on_branch, back, record, window = await same(conversation_store, scenario)
    assert on_branch[0] == [*turns(2), ask("instead")]
    assert back[0] == turns(4) and window[0] == turns(4)[-1:]
    assert len(after_branch[7]) == 1 and len(record[7]) == 1


async def test_branch_errors(conversation_store: ChatkeepConversationStore) -> None:
    """``branch`` raises ``UserError`` for a conversation the store lacks, an ``at`` out of
    range, an unknown ``from_entry`` or not exactly one of them; ``ConversationConflict``
    for a stale revision."""
    cases: list[Callable[[ConversationStore, str], Awaitable[Any]]] = [
        lambda s, rev: s.branch("missing", at=0, expected_revision=rev),
        lambda s, rev: s.branch("c", at=5, expected_revision=rev),
        lambda s, rev: s.branch("c", from_entry="no-such-entry", expected_revision=rev),
        lambda s, rev: s.branch("c", expected_revision=rev),
        lambda s, rev: s.branch("c", at=1, from_entry="x", expected_revision=rev),
        lambda s, rev: s.branch("c", at=1, expected_revision="stale"),
    ]
    for case in cases:

        async def scenario(store: ConversationStore, labels: Labels, case: Any = case) -> Any:
            conversation = Conversation(messages=turns(3), conversation_id="c")
            await store.save(conversation)
            await case(store, conversation.revision)

        result = await same(conversation_store, scenario)
        assert result in ("UserError", "ConversationConflict")


async def test_branch_to_nothing_and_rewrite(conversation_store: ChatkeepConversationStore) -> None:
    """``branch(at=0)`` empties the history; a save whose messages rewrite the stored ones
    branches off the last shared message and keeps the old branch."""

    async def scenario(store: ConversationStore, labels: Labels) -> Any:
        conversation = Conversation(messages=turns(3), conversation_id="c")
        await store.save(conversation)
        rewritten = Conversation(
            messages=[turns(3)[0], answer("other")],
            conversation_id="c",
            revision=conversation.revision,
        )
        await store.save(rewritten)
        after_rewrite = (
            labels.conversation(await store.load("c")),
            labels.record(await store.read_record("c")),
        )
        assert rewritten.revision is not None
        empty = await store.branch("c", at=0, expected_revision=rewritten.revision)
        empty.messages.append(ask("fresh"))
        await store.save(empty)
        return (
            after_rewrite,
            labels.conversation(await store.load("c")),
            labels.record(await store.read_record("c")),
        )

    after_rewrite, fresh, record = await same(conversation_store, scenario)
    assert after_rewrite[0][0] == [turns(3)[0], answer("other")]
    assert fresh[0] == [ask("fresh")] and len(record[7]) == 2


# -- fork ----------------------------------------------------------------------------------


async def test_fork(conversation_store: ChatkeepConversationStore) -> None:
    """``fork`` starts a new conversation from a stored one's history (all of it, ``at``
    messages, or up to ``from_entry``), sharing entries; the usage and deferred requests
    carry over only when it keeps the whole history; the original goes on unchanged."""

    async def scenario(store: ConversationStore, labels: Labels) -> Any:
        source = Conversation(
            messages=turns(4),
            conversation_id="c",
            usage=RunUsage(requests=2, input_tokens=10),
            deferred_tool_requests=DeferredToolRequests(
                calls=[ToolCallPart("t", {"a": 1}, "call-1")]
            ),
        )
        entries = await store.save(source, scope="s")
        whole = await store.fork("c", new_conversation_id="whole")
        part = await store.fork("c", at=2, new_conversation_id="part", scope="other")
        early = await store.fork("c", from_entry=entries[0].id, new_conversation_id="early")
        part.messages.append(ask("on the fork"))
        await store.save(part)
        source.messages.append(ask("on the source"))
        await store.save(source)
        made = await store.fork("c")  # a new id
        return (
            labels.conversation(whole),
            labels.conversation(part),
            labels.conversation(early),
            labels.record(await store.read_record("part")),
            labels.record(await store.read_record("whole")),
            labels.conversation(await store.load("part")),
            labels.conversation(await store.load("c")),
            len(made.messages),
            made.conversation_id != "c",
        )

    result = await same(conversation_store, scenario)
    whole, part, early, part_record, whole_record, part_loaded, source = result[:7]
    assert whole[0] == turns(4) and whole[1] == RunUsage(requests=2, input_tokens=10)
    assert part[1] == RunUsage() and part[3] is None and early[0] == turns(1)
    assert part_record[4] == "other" and part_record[5] == "c" and whole_record[4] == "s"
    assert part_loaded[0] == [*turns(2), ask("on the fork")]
    assert source[0] == [*turns(4), ask("on the source")]


async def test_fork_errors(conversation_store: ChatkeepConversationStore) -> None:
    """``fork`` raises ``ConversationConflict`` for a ``new_conversation_id`` already stored
    and ``UserError`` for a source the store lacks or an ``at`` out of range."""
    cases: list[Callable[[ConversationStore], Awaitable[Any]]] = [
        lambda s: s.fork("c", new_conversation_id="taken"),
        lambda s: s.fork("missing"),
        lambda s: s.fork("c", at=9),
        lambda s: s.fork("c", from_entry="nope"),
    ]
    for case in cases:

        async def scenario(store: ConversationStore, labels: Labels, case: Any = case) -> Any:
            await store.save(Conversation(messages=turns(2), conversation_id="c"))
            await store.save(Conversation(messages=turns(1), conversation_id="taken"))
            await case(store)

        assert await same(conversation_store, scenario) in ("UserError", "ConversationConflict")


async def test_fork_from_a_branch_left(conversation_store: ChatkeepConversationStore) -> None:
    """``fork(from_entry=)`` may name an entry of a branch the conversation left."""

    async def scenario(store: ConversationStore, labels: Labels) -> Any:
        conversation = Conversation(messages=turns(4), conversation_id="c")
        entries = await store.save(conversation)
        assert conversation.revision is not None
        await store.branch("c", at=1, expected_revision=conversation.revision)
        fork = await store.fork("c", from_entry=entries[2].id, new_conversation_id="f")
        fork.messages.append(ask("more"))
        await store.save(fork)
        return labels.conversation(await store.load("f"))

    loaded = await same(conversation_store, scenario)
    assert loaded[0] == [*turns(3), ask("more")]


# -- delete --------------------------------------------------------------------------------


async def test_delete(conversation_store: ChatkeepConversationStore) -> None:
    """``delete``: it no longer loads or lists, its entries no other conversation reaches
    are gone, and its id can be used again for a new conversation."""

    async def scenario(store: ConversationStore, labels: Labels) -> Any:
        entries = await store.save(Conversation(messages=turns(3), conversation_id="c"))
        await store.save(Conversation(messages=turns(1), conversation_id="other"))
        await store.delete("c")
        gone = []
        for entry in entries:
            try:
                await store.read_entry(entry.id)
            except KeyError:
                gone.append(True)
        await store.delete("c")  # already gone: nothing
        await store.save(Conversation(messages=[ask("again")], conversation_id="c"))
        return (
            gone,
            [r.conversation_id for r in await store.list_conversations()],
            labels.conversation(await store.load("c")),
        )

    result = await same_but_kept(conversation_store, scenario, kept=[])
    if result is None:  # a store that cannot delete kept the entries
        return
    gone, listed, again = result
    assert gone == [True, True, True] and sorted(listed) == ["c", "other"]
    assert again[0] == [ask("again")]


async def test_delete_keeps_what_a_fork_shares(
    conversation_store: ChatkeepConversationStore,
) -> None:
    """Deleting a conversation releases only the entries no remaining conversation's
    history reaches: a fork keeps the history it shares and goes on."""

    async def scenario(store: ConversationStore, labels: Labels) -> Any:
        entries = await store.save(Conversation(messages=turns(4), conversation_id="c"))
        await store.fork("c", at=2, new_conversation_id="f")
        await store.delete("c")
        fork = await store.load("f")
        assert fork is not None
        fork.messages.append(ask("still here"))
        await store.save(fork)
        kept = [labels(e.id) for e in entries[:2] if await store.read_entry(e.id)]
        released = 0
        for entry in entries[2:]:
            try:
                await store.read_entry(entry.id)
            except KeyError:
                released += 1
        return released, labels.conversation(await store.load("f")), kept

    result = await same_but_kept(conversation_store, scenario, kept=0)
    if result is None:
        return
    released, loaded, kept = result
    assert loaded[0] == [*turns(2), ask("still here")] and len(kept) == 2 and released == 2


async def test_delete_conflicts(conversation_store: ChatkeepConversationStore) -> None:
    """``delete_record`` raises ``ConversationConflict`` unless the stored revision is the
    one given; ``write_record`` does for a record that exists when none is expected."""

    async def scenario(store: ConversationStore, labels: Labels) -> Any:
        conversation = Conversation(messages=turns(1), conversation_id="c")
        await store.save(conversation)
        results = []
        for call in (
            lambda: store.delete_record("c", expected_revision="stale"),
            lambda: store.delete_record("missing", expected_revision="x"),
            lambda: store.write_record(
                ConversationRecord(conversation_id="c", head_id=None), expected_revision=None
            ),
        ):
            try:
                await call()
                results.append("stored")
            except ConversationConflict:
                results.append("conflict")
        return results, labels.conversation(await store.load("c"))

    results, loaded = await same(conversation_store, scenario)
    assert results == ["conflict"] * 3 and loaded[0] == turns(1)


# -- the primitives --------------------------------------------------------------------------


async def test_write_record_needs_its_head(conversation_store: ChatkeepConversationStore) -> None:
    """``write_record`` raises ``ConversationConflict`` when ``record.head_id`` names an
    entry neither the store nor ``new_entries`` has; nothing is stored."""

    async def scenario(store: ConversationStore, labels: Labels) -> Any:
        orphan = ConversationRecord(conversation_id="c", head_id="no-such-entry")
        try:
            await store.write_record(orphan, expected_revision=None)
        except ConversationConflict:
            return "conflict", await store.read_record("c")
        return "stored", None

    assert await same(conversation_store, scenario) == ("conflict", None)


async def test_read_history_and_entries(conversation_store: ChatkeepConversationStore) -> None:
    """``read_history``: the entries up to ``head_id`` in order (``[]`` for ``None``), the
    last ``limit`` of them; ``read_entry`` gives one entry; an unknown id is a ``KeyError``."""

    async def scenario(store: ConversationStore, labels: Labels) -> Any:
        entries = await store.save(Conversation(messages=turns(5), conversation_id="c"))
        middle = await store.read_history(entries[2].id)
        window = await store.read_history(entries[-1].id, limit=2)
        one = await store.read_entry(entries[3].id)
        return (
            labels.entries(middle),
            labels.entries(window),
            labels.entries([one]),
            await store.read_history(None),
        )

    middle, window, one, empty = await same(conversation_store, scenario)
    assert [m for _, _, m in middle] == turns(3) and [m for _, _, m in window] == turns(5)[-2:]
    assert one[0][2] == turns(5)[3] and empty == []

    async def unknown(store: ConversationStore, labels: Labels) -> Any:
        await store.read_entry("nope")

    assert await outcome(unknown, conversation_store) == ("raised", "KeyError")


async def test_usage_and_deferred_requests_round_trip(
    conversation_store: ChatkeepConversationStore,
) -> None:
    """The record keeps what the messages can't: usage and deferred tool requests, exactly."""
    usage = RunUsage(
        requests=3,
        tool_calls=2,
        input_tokens=120,
        output_tokens=45,
        cache_read_tokens=7,
        details={"reasoning": 11},
    )
    deferred = DeferredToolRequests(
        calls=[ToolCallPart("lookup", {"q": "Oslo", "n": [1, 2.5, None]}, "call-1")],
        approvals=[ToolCallPart("delete", '{"path": "/tmp/x"}', "call-2")],
        metadata={"call-2": {"reason": "dangerous", "level": 3, "nested": {"a": [True, "é😀"]}}},
    )

    async def scenario(store: ConversationStore, labels: Labels) -> Any:
        conversation = Conversation(
            messages=[ask("go"), answer("pausing")],
            conversation_id="c",
            usage=usage,
            deferred_tool_requests=deferred,
        )
        await store.save(conversation)
        loaded = await store.load("c")
        assert loaded is not None
        return loaded.usage, loaded.deferred_tool_requests

    loaded_usage, loaded_deferred = await same(conversation_store, scenario)
    assert loaded_usage == usage and loaded_deferred == deferred


async def test_the_record_is_a_copy(conversation_store: ChatkeepConversationStore) -> None:
    """Changing a record or conversation after saving or loading doesn't change what was
    saved (``InMemoryConversationStore`` keeps its own copy, as a serializing store does)."""
    conversation = Conversation(messages=turns(2), conversation_id="c", usage=RunUsage(requests=1))
    await conversation_store.save(conversation)
    conversation.usage.requests = 99
    record = await conversation_store.read_record("c")
    assert record is not None and record.usage.requests == 1
    record.branches.append("x")
    again = await conversation_store.read_record("c")
    assert again is not None and again.branches == []
    assert replace(again, revision=record.revision) != record  # the appended branch


async def test_two_handles_write_what_the_other_saved(
    conversation_store: ChatkeepConversationStore,
) -> None:
    """A handle that read an older revision still writes on top of the newer one another
    handle saved when it names that one (what it read last is only a hint)."""
    first = fresh(conversation_store)
    assert isinstance(first, ChatkeepConversationStore)
    second = ChatkeepConversationStore(store=first.store, prefix=first.prefix)
    await first.save(Conversation(messages=turns(1), conversation_id="c"))
    stale = await first.read_record("c")
    loaded = await second.load("c")
    assert stale is not None and loaded is not None
    loaded.messages.append(answer("from the second"))
    await second.save(loaded)
    newer = await second.read_record("c")
    assert newer is not None and newer.revision != stale.revision
    moved = replace(newer, revision="next", usage=RunUsage(requests=7))
    await first.write_record(moved, expected_revision=newer.revision)
    assert (await first.read_record("c")) == moved
    with pytest.raises(ConversationConflict):
        await first.write_record(replace(moved, revision="x"), expected_revision=stale.revision)
