"""``pop_item`` after an in-place edit of the view (``chatkeep.core.views.edit_*``): the
pop takes the newest item off and leaves the edit in place."""

from __future__ import annotations

import asyncio

from chatkeep.core import Message, open_store
from chatkeep.core.views import edit_insert, edit_replace, read_view
from chatkeep.openai_agents import ChatkeepSession


def test_pop_after_an_edit_keeps_the_edit() -> None:
    store = open_store("memory://")
    session = ChatkeepSession("s", store=store)

    async def scenario() -> None:
        await session.add_items(
            [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]
        )
        edit_insert(store, "s", 1, Message.user("inserted"))
        assert await session.pop_item() == {"role": "user", "content": "b"}
        assert [m.text for m in read_view(store, "s")] == ["a", "inserted"]
        edit_replace(store, "s", 0, Message.user("a, redacted"))
        popped = await session.pop_item()
        assert popped == {"role": "user", "content": "inserted"}
        assert [m.text for m in read_view(store, "s")] == ["a, redacted"]

    asyncio.run(scenario())
