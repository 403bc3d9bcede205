"""A session object kept across turns (``HistoryProvider``'s view cache) over a ``shared``
store: whatever another handle does to the session between two turns, the next turn
loads exactly what a fresh load would.

:class:`~chatkeep.core.HistoryProvider` keeps the decoded view (a window, or the whole
history: the default) in the :class:`~chatkeep.core.AgentSession` object and trusts it
only after a tail read shows the log as it left it. These tests make another handle
(standing for another process) append, undo, compact, fork, edit in place, write between
a turn's load and its save, delete and re-create, and compare every load of the kept
session with a cold load through the other handle, for a window and for the whole history.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from chatkeep.core import (
    AgentSession,
    FunctionCallContent,
    FunctionResultContent,
    HistoryProvider,
    Message,
    SlidingWindowReducer,
    Store,
    acompact,
    adelete_session,
    afork,
    aundo,
    encode_records,
    new_id,
)
from chatkeep.core.views import aedit_replace

from ..checks import new_session_id
from ._base import ConformanceBase

__all__ = ["KeptSessionDeleteTests", "KeptSessionTests"]

_WINDOW = 6
#: The loads every scenario runs with: a window, and the whole history (the default).
_LIMITS = (_WINDOW, None)


class _Turns:
    """One provider over the store under test, and a kept session object."""

    def __init__(self, store: Store, session_id: str, limit: int | None = _WINDOW) -> None:
        self.provider = HistoryProvider(store, max_messages=limit)
        self.session = AgentSession(session_id)
        self.number = 0

    async def turn(self, tool: bool = False) -> list[Message]:
        """One model call: load, then store the request and the answer. Returns what was
        loaded (the history the model saw)."""
        self.number += 1
        n = self.number
        request = [Message.user(f"q{n}")]
        history = await self.provider.invoking(self.session, request)
        if tool:
            answer = [
                Message("assistant", [FunctionCallContent(f"c{n}", "look", {"n": n})]),
                Message("tool", [FunctionResultContent(f"c{n}", {"found": n})]),
                Message.assistant(f"a{n}"),
            ]
        else:
            answer = [Message.assistant(f"a{n}")]
        await self.provider.invoked(self.session, request, answer)
        return history[: -len(request)]

    async def load(self) -> list[Message]:
        return await self.provider.invoking(self.session, [])


async def _cold(store: Store, session_id: str, limit: int | None = _WINDOW) -> list[Message]:
    """What a fresh session object loads (no cache) through ``store``."""
    provider = HistoryProvider(store, max_messages=limit, cache_view=False)
    return await provider.invoking(AgentSession(session_id), [])


async def aappend_messages(store: Store, session_id: str, messages: list[Message]) -> None:
    """Store ``messages`` (with fresh ids) as another writer would."""
    stored = [Message(m.role, m.contents, message_id=new_id()) for m in messages]
    await store.aappend(session_id, encode_records(stored))


def _texts(messages: list[Message]) -> list[str]:
    return [m.text or m.contents[0].type for m in messages]


class KeptSessionTests(ConformanceBase):
    """A kept session sees another handle's appends, undo, compaction and writes made
    between its load and its save (the window cache is checked, never trusted blindly)."""

    def test_a_kept_session_loads_what_a_fresh_one_would(
        self, chatkeep_store: Store, chatkeep_reopen: Callable[[], Store]
    ) -> None:
        other = chatkeep_reopen()

        async def scenario(limit: int | None) -> None:
            session_id = new_session_id("kept")
            kept = _Turns(chatkeep_store, session_id, limit)

            async def cold(of: str = session_id) -> list[Message]:
                return await _cold(other, of, limit)

            for n in range(6):
                await kept.turn(tool=n % 3 == 1)
            assert await kept.load() == await cold(), "warm turns drifted"

            # another handle appends: the next load shows it
            await aappend_messages(other, session_id, [Message.user("from elsewhere")])
            seen = await kept.load()
            assert seen == await cold()
            assert seen[-1].text == "from elsewhere", "another handle's append was missed"

            # another handle undoes the last turn (a retract record)
            await kept.turn()
            await aundo(other, session_id)
            assert await kept.load() == await cold(), "an undo was missed"

            # another handle compacts (a checkpoint): the view shrinks to the reducer's
            await kept.turn(tool=True)
            await acompact(other, session_id, SlidingWindowReducer(2))
            seen = await kept.load()
            assert seen == await cold(), "a compaction was missed"
            assert len(seen) <= 3

            # another handle edits the view in place (a redaction)
            await kept.turn()
            await aedit_replace(other, session_id, 0, Message.user("redacted"))
            seen = await kept.load()
            assert seen == await cold(), "an in-place edit was missed"
            assert seen[0].text == "redacted"

            # a fork from elsewhere, written to: the parent's view is unchanged
            child = await afork(other, session_id)
            await aappend_messages(other, child, [Message.user("in the fork")])
            assert await kept.load() == await cold()
            forked = _Turns(chatkeep_store, child, limit)
            for _ in range(3):
                await forked.turn()
            assert await forked.load() == await cold(child)
            await kept.turn()
            assert await kept.load() == await cold()
            assert await forked.load() == await cold(child)

        for limit in _LIMITS:
            asyncio.run(scenario(limit))

    def test_a_write_between_a_load_and_its_save_is_not_lost(
        self, chatkeep_store: Store, chatkeep_reopen: Callable[[], Store]
    ) -> None:
        other = chatkeep_reopen()

        async def scenario(limit: int | None) -> None:
            session_id = new_session_id("kept")
            kept = _Turns(chatkeep_store, session_id, limit)
            for _ in range(4):
                await kept.turn()
            # another writer's message lands after this turn's load, before its save: this
            # turn's messages follow it in the log, and the next load must show all three
            request = [Message.user("mine", message_id=new_id())]
            await kept.provider.invoking(kept.session, request)
            await aappend_messages(other, session_id, [Message.user("theirs")])
            await kept.provider.invoked(kept.session, request, [Message.assistant("answer")])
            seen = await kept.load()
            assert seen == await _cold(other, session_id, limit)
            assert _texts(seen)[-3:] == ["theirs", "mine", "answer"], _texts(seen)
            # and warm turns go on from there
            for _ in range(3):
                await kept.turn()
            assert await kept.load() == await _cold(other, session_id, limit)

        for limit in _LIMITS:
            asyncio.run(scenario(limit))


class KeptSessionDeleteTests(ConformanceBase):
    """``shared`` and ``delete``: a kept session sees its session deleted by another handle,
    and a new conversation stored under the same id (also one that ends with the very
    record the kept session saw last)."""

    def test_a_kept_session_sees_a_delete_and_a_new_log(
        self, chatkeep_store: Store, chatkeep_reopen: Callable[[], Store]
    ) -> None:
        other = chatkeep_reopen()

        async def scenario(limit: int | None) -> None:
            session_id = new_session_id("kept")
            kept = _Turns(chatkeep_store, session_id, limit)
            for _ in range(3):
                await kept.turn()
            await adelete_session(other, session_id)
            assert await kept.load() == [], "a deleted session still loads"
            await kept.turn()
            await adelete_session(other, session_id)
            await aappend_messages(other, session_id, [Message.user("a new start")])
            seen = await kept.load()
            assert _texts(seen) == ["a new start"]
            assert seen == await _cold(other, session_id, limit)

            # re-created ending with the record the kept session saw last: still a new log
            for _ in range(2):
                await kept.turn()
            last = (await other.aread(session_id, -1))[0]
            await adelete_session(other, session_id)
            await aappend_messages(other, session_id, [Message.user("again")])
            await other.aappend(session_id, [last])
            seen = await kept.load()
            assert seen == await _cold(other, session_id, limit), "a re-created log was missed"
            assert _texts(seen)[0] == "again"

        for limit in _LIMITS:
            asyncio.run(scenario(limit))
