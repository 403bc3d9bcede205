"""Unknown outcomes on the wire (Azurite behind a transport that loses responses).

A lost response after the service applied an Append Block is the case that breaks naive
retries: the client's retry finds the blob longer (HTTP 412) and must tell whether its own
batch is what made it longer. Every test ends with each record stored exactly once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from chatkeep.core import Record, Store, StoreUnavailable

pytestmark = pytest.mark.usefixtures("blob_service")


def batch(tag: str, count: int = 3) -> list[Record]:
    return [Record(f"{tag}-{n}", f"{tag}:{n}".encode()) for n in range(count)]


def ids(store: Store, session: str) -> list[str]:
    return [record.id for record in store.read(session)]


def test_client_retry_after_a_lost_response_is_not_duplicated(
    open_azure: Callable[..., Store], wire: Any, sync_transport: Any
) -> None:
    store = open_azure(prefix="lost", transport=sync_transport, retries=3, retry_backoff=0.01)
    store.append("s", batch("a"))
    wire.lose(1)  # the service applies the append; the client sees a dropped connection
    store.append("s", batch("b"))  # the SDK retries, gets 412, and we find our batch there
    assert wire.lost == 1
    appends = [url for method, url, _ in wire.requests if "comp=appendblock" in url]
    assert len(appends) == 3, "the lost append should have been sent twice"
    assert ids(open_azure(prefix="lost"), "s") == [r.id for r in batch("a") + batch("b")]


def test_failed_append_then_caller_retry_stores_once(
    open_azure: Callable[..., Store], wire: Any, sync_transport: Any
) -> None:
    store = open_azure(prefix="unsure", transport=sync_transport, retries=0)
    other = open_azure(prefix="unsure")
    store.append("s", batch("a"))
    wire.lose(1)
    with pytest.raises(StoreUnavailable, match="may or may not be stored"):
        store.append("s", batch("b"))
    other.append("s", batch("c"))  # someone else writes before the caller retries
    store.append("s", batch("b"))
    assert ids(other, "s") == [r.id for r in batch("a") + batch("b") + batch("c")]


def test_refused_before_sending_then_retry(
    open_azure: Callable[..., Store], wire: Any, sync_transport: Any
) -> None:
    store = open_azure(prefix="refused", transport=sync_transport, retries=0)
    store.append("s", batch("a"))
    wire.refuse(1)
    with pytest.raises(StoreUnavailable):
        store.append("s", batch("b"))
    store.append("s", batch("b"))
    assert ids(open_azure(prefix="refused"), "s") == [r.id for r in batch("a") + batch("b")]


def test_lost_responses_under_contention(
    open_azure: Callable[..., Store], wire: Any, sync_transport: Any
) -> None:
    flaky = open_azure(prefix="flaky", transport=sync_transport, retries=2, retry_backoff=0.01)
    steady = open_azure(prefix="flaky")
    expected: list[str] = []
    for n in range(10):
        steady.append("s", batch(f"s{n}", 1))
        wire.lose(1)
        try:
            flaky.append("s", batch(f"f{n}", 2))
        except StoreUnavailable:
            flaky.append("s", batch(f"f{n}", 2))
        expected += [r.id for r in batch(f"s{n}", 1) + batch(f"f{n}", 2)]
    assert sorted(ids(steady, "s")) == sorted(expected)
    assert len(ids(steady, "s")) == len(expected)


def test_async_lost_response(
    open_azure: Callable[..., Store], wire: Any, async_transport: Any
) -> None:
    store = open_azure(prefix="alost", async_transport=async_transport, retries=0)

    async def scenario() -> None:
        await store.aappend("s", batch("a"))
        wire.lose(1)
        with pytest.raises(StoreUnavailable):
            await store.aappend("s", batch("b"))
        await store.aappend("s", batch("b"))

    asyncio.run(scenario())
    assert wire.lost == 1
    assert ids(open_azure(prefix="alost"), "s") == [r.id for r in batch("a") + batch("b")]
