"""``ChatkeepSession`` keeps what its last ``get_items`` read (a ``chatkeep.core.TailCache``
of plain records): the next read is a tail read, and whatever another session object (or
process) did in between is seen. Run on SQLite, PostgreSQL and Redis."""

from __future__ import annotations

from typing import Any

import pytest

from chatkeep.core import Message, Store, aundo, encode_records, new_id
from chatkeep.openai_agents import ChatkeepSession

pytestmark = [pytest.mark.anyio]


def _texts(items: list[Any]) -> list[str]:
    return [item["content"] for item in items]


async def test_a_kept_session_reads_the_tail_and_sees_other_writers(
    store: Store, sid: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    kept = ChatkeepSession(sid, store=store)
    other = ChatkeepSession(sid, store=store)
    for n in range(3):
        await kept.get_items()
        await kept.add_items([{"role": "user", "content": f"q{n}"}])
        await kept.add_items([{"role": "assistant", "content": f"a{n}"}])  # a second append
    reads: list[tuple[int, int | None]] = []
    cls = type(store)
    real_read, real_aread = cls.read, cls.aread

    def read(self: Store, session_id: str, start: int = 0, stop: int | None = None) -> Any:
        reads.append((start, stop))
        return real_read(self, session_id, start, stop)

    async def aread(self: Store, session_id: str, start: int = 0, stop: int | None = None) -> Any:
        reads.append((start, stop))
        return await real_aread(self, session_id, start, stop)

    monkeypatch.setattr(cls, "read", read)  # the class: a Store's slots are read-only
    monkeypatch.setattr(cls, "aread", aread)
    items = await kept.get_items()
    assert _texts(items) == ["q0", "a0", "q1", "a1", "q2", "a2"]
    assert reads == [(-3, None)], "a kept session read more than its tail"
    monkeypatch.undo()
    items[0]["content"] = "changed by the caller"  # never reaches the cache
    assert _texts(await kept.get_items())[0] == "q0"

    await other.add_items([{"role": "user", "content": "from elsewhere"}])
    assert _texts(await kept.get_items())[-1] == "from elsewhere"
    assert _texts(await kept.get_items(limit=2)) == ["a2", "from elsewhere"]
    await aundo(store, sid)  # a retract: not a plain tail, the view is read
    assert await kept.get_items() == await ChatkeepSession(sid, store=store).get_items()
    await kept.add_items([{"role": "user", "content": "after the undo"}])
    assert await kept.get_items() == await ChatkeepSession(sid, store=store).get_items()


async def test_a_new_log_under_the_same_id_is_seen(store: Store, sid: str) -> None:
    if not store.supports("delete"):
        pytest.skip("the store cannot delete")
    kept = ChatkeepSession(sid, store=store)
    await kept.add_items([{"role": "user", "content": "old"}])
    assert _texts(await kept.get_items()) == ["old"]
    await ChatkeepSession(sid, store=store).clear_session()
    message = Message.user("new", message_id=new_id())
    await store.aappend(sid, encode_records([message]))
    assert await kept.get_items() == await ChatkeepSession(sid, store=store).get_items()
