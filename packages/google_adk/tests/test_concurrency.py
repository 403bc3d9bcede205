"""App and user state stay right with several processes appending at once to different
sessions of one user (issue 25): each ``app:``/``user:`` change is a conditional append
after the state it was computed from, retried after another writer's, so none is lost.

The worker processes are started once for every store (starting ADK in a process is most
of the cost); on each store they wait for each other, then append as fast as they can.
"""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import pytest
from adk_support import APP, USER, share_state
from conftest import SHARED_STORES, url_for

from chatkeep.google_adk import ChatkeepSessionService

pytestmark = pytest.mark.anyio

WORKERS = 3
EVENTS = 8


async def test_concurrent_sessions_of_one_user_lose_no_shared_state(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    urls = {backend: url_for(backend, request, tmp_path) for backend in SHARED_STORES}
    context = multiprocessing.get_context("spawn")
    start = context.Barrier(WORKERS)
    workers = [
        context.Process(target=share_state, args=(list(urls.values()), w, EVENTS, start))
        for w in range(WORKERS)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=300)
    assert [w.exitcode for w in workers] == [0] * WORKERS

    expected = {f"w{w}-{s}": s for w in range(WORKERS) for s in range(EVENTS)}
    for backend, url in urls.items():
        service = ChatkeepSessionService(url=url)
        user_state = await service.get_user_state(app_name=APP, user_id=USER)
        assert user_state == expected, backend
        newcomer = await service.create_session(app_name=APP, user_id="someone-else")
        app_state = {k: v for k, v in newcomer.state.items() if k.startswith("app:")}
        assert app_state == {f"app:{key}": value for key, value in expected.items()}, backend
        listed = (await service.list_sessions(app_name=APP, user_id=USER)).sessions
        assert sorted(s.id for s in listed) == [f"worker-{w}" for w in range(WORKERS)]
        for session in listed:
            got = await service.get_session(app_name=APP, user_id=USER, session_id=session.id)
            assert got is not None and len(got.events) == EVENTS, backend
        await service.close()
