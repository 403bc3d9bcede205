"""The blocking entry points (``Agent.run_sync``, ``compact`` with an async reducer) reuse
one event loop per thread (``chatkeep.core._loop.run_blocking``) instead of making a new
one per call as ``asyncio.run`` does, and otherwise behave like ``asyncio.run``."""

from __future__ import annotations

import asyncio
import threading
import warnings

import pytest

from chatkeep.core import (
    Agent,
    AgentSession,
    ChatResponse,
    HistoryProvider,
    Message,
    encode_records,
    new_id,
    open_store,
)
from chatkeep.core._loop import run_blocking
from chatkeep.core.views import compact, read_view


async def current_loop() -> asyncio.AbstractEventLoop:
    return asyncio.get_running_loop()


def test_one_loop_per_thread_reused_across_calls() -> None:
    first = run_blocking(current_loop())
    assert run_blocking(current_loop()) is first
    assert not first.is_closed()
    seen: list[asyncio.AbstractEventLoop] = []
    worker = threading.Thread(target=lambda: seen.append(run_blocking(current_loop())))
    worker.start()
    worker.join()
    assert seen and seen[0] is not first


def test_results_and_errors_come_back_as_from_asyncio_run() -> None:
    async def fail() -> None:
        await asyncio.sleep(0)
        raise KeyError("boom")

    assert run_blocking(asyncio.sleep(0, result=7)) == 7
    with pytest.raises(KeyError, match="boom"):
        run_blocking(fail())
    assert run_blocking(asyncio.sleep(0, result=8)) == 8


def test_tasks_left_pending_are_cancelled_before_it_returns() -> None:
    cancelled = []

    async def background() -> None:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancelled.append(True)
            raise

    async def spawn() -> asyncio.Task[None]:
        task = asyncio.get_running_loop().create_task(background())
        await asyncio.sleep(0)
        return task

    task = run_blocking(spawn())
    assert task.cancelled() and cancelled == [True]


def test_inside_a_running_loop_it_raises_and_closes_the_coroutine() -> None:
    async def inner() -> None:
        coroutine = current_loop()
        with pytest.raises(RuntimeError, match="running event loop"):
            run_blocking(coroutine)
        assert coroutine.cr_frame is None  # closed: no "never awaited" warning later

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        asyncio.run(inner())


def test_an_interrupted_call_leaves_a_fresh_loop_for_the_next() -> None:
    async def interrupted() -> None:
        asyncio.get_running_loop().call_soon(_interrupt)
        await asyncio.sleep(3600)

    before = run_blocking(current_loop())
    with pytest.raises(KeyboardInterrupt):
        run_blocking(interrupted())
    assert before.is_closed()
    after = run_blocking(current_loop())
    assert after is not before and not after.is_closed()


def _interrupt() -> None:
    raise KeyboardInterrupt


class LoopRecordingClient:
    """An async chat client that notes the loop of each call."""

    def __init__(self) -> None:
        self.loops: list[asyncio.AbstractEventLoop] = []

    async def get_response(
        self, messages: list[Message], *, conversation_id: str | None = None
    ) -> ChatResponse:
        self.loops.append(asyncio.get_running_loop())
        await asyncio.sleep(0)
        return ChatResponse([Message.assistant(f"saw {len(messages)}")])


def test_run_sync_turns_share_the_threads_loop() -> None:
    client = LoopRecordingClient()
    store = open_store("memory://")
    agent = Agent(client, history_provider=HistoryProvider(store))
    session = AgentSession("s")
    assert agent.run_sync("a", session).text == "saw 1"
    assert agent.run_sync("b", session).text == "saw 3"
    assert len(client.loops) == 2 and client.loops[0] is client.loops[1]
    assert [m.text for m in read_view(store, "s")] == ["a", "saw 1", "b", "saw 3"]


def test_compact_with_an_async_reducer_runs_it_on_the_threads_loop() -> None:
    store = open_store("memory://")
    store.append("s", encode_records([Message.user(str(i), message_id=new_id()) for i in range(5)]))
    loops: list[asyncio.AbstractEventLoop] = []

    async def keep_two(messages: list[Message]) -> list[Message]:
        loops.append(asyncio.get_running_loop())
        return messages[-2:]

    assert compact(store, "s", keep_two) is not None
    assert [m.text for m in read_view(store, "s")] == ["3", "4"]
    assert loops == [run_blocking(current_loop())]
