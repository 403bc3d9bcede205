"""``pop_item`` is race-free: concurrent pops of one session each get a different item.

Within a process pops of one session are serialized whatever the store; across handles
and processes the store's conditional append (capability ``conditional``) decides, and a
pop that loses a race reads again. Also: pops next to chatkeep's own log views (undo,
forks, compaction), which the session's history is a view of.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
import threading
import uuid
from pathlib import Path
from typing import Any

import pytest

from chatkeep.core import (
    Message,
    SlidingWindowReducer,
    Store,
    compact,
    fork,
    open_store,
    read_view,
)
from chatkeep.openai_agents import ChatkeepSession

pytestmark = [pytest.mark.anyio, pytest.mark.filterwarnings("error")]


def numbered(count: int) -> list[Any]:
    return [{"role": "user", "content": f"item {n}"} for n in range(count)]


async def test_two_sessions_on_one_store_pop_each_item_once(store: Store, sid: str) -> None:
    await ChatkeepSession(sid, store=store).add_items(numbered(20))
    one, two = ChatkeepSession(sid, store=store), ChatkeepSession(sid, store=store)
    popped = await asyncio.gather(*(session.pop_item() for session in [one, two] * 12))
    got = [item["content"] for item in popped if item is not None]
    assert sorted(got) == sorted(f"item {n}" for n in range(20))
    assert popped.count(None) == 4
    assert await one.get_items() == []


def test_handles_racing_through_conditional_appends() -> None:
    """Separate store handles (so no process-local lock is shared): only the store's
    conditional append keeps the pops apart."""
    name = f"memory://pops-{uuid.uuid4().hex}"
    stores = [open_store(name) for _ in range(4)]
    assert stores[0].supports("conditional")
    asyncio.run(ChatkeepSession("s", store=stores[0]).add_items(numbered(60)))
    results: list[Any] = []
    start = threading.Barrier(4)

    def popper(store: Store) -> None:
        session = ChatkeepSession("s", store=store)
        start.wait()
        for _ in range(20):
            results.append(asyncio.run(session.pop_item()))

    threads = [threading.Thread(target=popper, args=(store,)) for store in stores]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    got = [item["content"] for item in results if item is not None]
    assert sorted(got) == sorted(f"item {n}" for n in range(60))
    assert results.count(None) == 20
    # Sixty retracts and nothing else: no pop wrote twice.
    assert len(stores[0].read("s")) == 120


POPPER = textwrap.dedent(
    """
    import asyncio, json, sys
    from chatkeep.openai_agents import ChatkeepSession

    async def main():
        session = ChatkeepSession(sys.argv[2], url=sys.argv[1])
        got = []
        for _ in range(int(sys.argv[3])):
            item = await session.pop_item()
            got.append(None if item is None else item["content"])
        await session.aclose()
        print(json.dumps(got))

    asyncio.run(main())
    """
)


@pytest.mark.parametrize("backend", ["sqlite", "postgres", "redis"])
async def test_processes_pop_each_item_once(
    backend: str, request: pytest.FixtureRequest, sid: str, tmp_path: Path
) -> None:
    url: str = request.getfixturevalue(f"{backend}_url")
    async with ChatkeepSession(sid, url=url) as session:
        if not session.store.supports("conditional"):
            pytest.xfail(f"the {backend} backend does not declare 'conditional' yet")
        await session.add_items(numbered(30))
    script = tmp_path / "pop.py"
    script.write_text(POPPER)
    processes = [
        subprocess.Popen(
            [sys.executable, str(script), url, sid, "12"], stdout=subprocess.PIPE, text=True
        )
        for _ in range(3)
    ]
    got: list[Any] = []
    for process in processes:
        out, _ = process.communicate(timeout=120)
        assert process.returncode == 0
        got.extend(json.loads(out.strip().splitlines()[-1]))
    popped = [item for item in got if item is not None]
    assert sorted(popped) == sorted(f"item {n}" for n in range(30))


# -- pops and chatkeep's log views -------------------------------------------------------------


async def test_pop_after_undo_and_in_a_fork(store: Store, sid: str) -> None:
    session = ChatkeepSession(sid, store=store)
    await session.add_items(numbered(6))
    assert (await session.pop_item())["content"] == "item 5"  # type: ignore[index]
    branch = fork(store, sid)
    child = ChatkeepSession(branch, store=store)
    assert [i["content"] for i in await child.get_items()] == [f"item {n}" for n in range(5)]
    # The fork's newest items live in its parent's log: popping them leaves the parent be.
    assert (await child.pop_item())["content"] == "item 4"  # type: ignore[index]
    assert (await child.pop_item())["content"] == "item 3"  # type: ignore[index]
    await child.add_items([{"role": "user", "content": "branch only"}])
    assert [i["content"] for i in await child.get_items()] == [
        "item 0", "item 1", "item 2", "branch only",
    ]  # fmt: skip
    assert len(await session.get_items()) == 5


async def test_pop_behind_a_compaction_checkpoint(store: Store, sid: str) -> None:
    session = ChatkeepSession(sid, store=store)
    await session.add_items(numbered(10))
    compact(store, sid, SlidingWindowReducer(4))  # the view is now items 6..9
    assert [i["content"] for i in await session.get_items()] == [f"item {n}" for n in range(6, 10)]
    # A retract reaching behind the checkpoint would bring items 0..5 back: never.
    assert (await session.pop_item())["content"] == "item 9"  # type: ignore[index]
    assert (await session.pop_item())["content"] == "item 8"  # type: ignore[index]
    assert [i["content"] for i in await session.get_items()] == ["item 6", "item 7"]
    await session.add_items([{"role": "user", "content": "new"}])
    assert [i["content"] for i in await session.get_items()] == ["item 6", "item 7", "new"]
    assert (await session.pop_item())["content"] == "new"  # type: ignore[index]
    assert [m.text for m in read_view(store, sid)] == ["item 6", "item 7"]


async def test_pop_of_a_summary_message(store: Store, sid: str) -> None:
    session = ChatkeepSession(sid, store=store)
    await session.add_items(numbered(4))

    def summarize(view: list[Message]) -> list[Message]:
        return [Message.system(f"summary of {len(view)} messages")]

    compact(store, sid, summarize)
    assert await session.get_items() == [{"role": "system", "content": "summary of 4 messages"}]
    assert await session.pop_item() == {"role": "system", "content": "summary of 4 messages"}
    assert await session.get_items() == []


async def test_clear_keeps_forks_and_erases_the_session(store: Store, sid: str) -> None:
    session = ChatkeepSession(sid, store=store)
    await session.add_items(numbered(3))
    branch = fork(store, sid)
    await session.clear_session()
    assert await session.get_items() == []
    assert store.read(sid) == []  # erased, not hidden: the store can delete
    assert len(await ChatkeepSession(branch, store=store).get_items()) == 3


async def test_clear_on_a_store_without_delete_hides_the_history(sid: str) -> None:
    inner = open_store("memory://")
    no_delete = Store(inner.backend, capabilities=inner.capabilities - {"delete"})
    session = ChatkeepSession(sid, store=no_delete)
    await session.add_items(numbered(3))
    await session.clear_session()
    assert await session.get_items() == []
    assert len(no_delete.read(sid)) == 4  # the log keeps the history (one checkpoint)
    await session.add_items([{"role": "user", "content": "after"}])
    assert [i["content"] for i in await session.get_items()] == ["after"]
