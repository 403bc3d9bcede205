"""The backend against Azurite: layout, round trips per turn, limits, auth and listing."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

import pytest

from chatkeep.azure_blob import AzureBlobAccessDenied, AzureBlobConfigError
from chatkeep.azure_blob.layout import encode_session_id
from chatkeep.core import AppendConflict, Record, Store, StoreUnavailable, open_store

pytestmark = pytest.mark.usefixtures("blob_service")


def records(tag: str, count: int = 2, size: int = 10) -> list[Record]:
    return [Record(f"{tag}-{n}", f"{tag}/{n}".encode().ljust(size, b"~")) for n in range(count)]


def test_layout_is_one_append_blob_per_session(
    open_azure: Callable[..., Store], blob_service: Any
) -> None:
    store = open_azure(prefix="layout-test")
    store.append("user/42", records("a"))
    store.append("user/42", records("b"))
    names = blob_service.names("layout-test/")
    assert names == [f"layout-test/chatkeep-v2/_/{encode_session_id('user/42')}/0000000000"]
    assert names == ["layout-test/chatkeep-v2/_/user~2f42/0000000000"]


def test_a_prefix_keyword_is_kept_literally_and_wins_over_the_url(
    blob_service: Any,
) -> None:
    tag = uuid.uuid4().hex[:8]
    store = open_store(blob_service.url(f"url-{tag}"), prefix=f"kw-{tag}/a%2Fb")
    try:
        store.append("s", records("a", 1))
        assert blob_service.names(f"url-{tag}/") == []
        assert blob_service.names(f"kw-{tag}/") == [f"kw-{tag}/a%2Fb/chatkeep-v2/_/s/0000000000"]
    finally:
        store.close()
    root = open_store(blob_service.url(f"url-{tag}"), prefix="/")
    try:
        assert root.backend._settings.root == ""  # type: ignore[attr-defined]
    finally:
        root.close()


def test_nested_prefix_tenants_never_see_each_other(blob_service: Any) -> None:
    tag = uuid.uuid4().hex[:8]
    parent = open_store(blob_service.url(f"acme-{tag}"))
    nested = open_store(blob_service.url(f"acme-{tag}/eu"))
    sibling = open_store(blob_service.url(f"acme-{tag}-eu"))
    try:
        nested.append("s", records("nested", 2))
        sibling.append("s", records("sibling", 2))
        parent.append("other", records("parent", 1))
        assert set(parent.list_sessions()) == {"other"}
        for session in ("eu", "eu/s", "s", "chatkeep-v2"):
            assert parent.read(session) == []
            parent.delete(session)
        assert [r.id for r in nested.read("s")] == ["nested-0", "nested-1"]
        assert [r.id for r in sibling.read("s")] == ["sibling-0", "sibling-1"]
        assert set(nested.list_sessions()) == {"s"}
    finally:
        for store in (parent, nested, sibling):
            store.close()


def test_turn_is_one_request_per_hook(
    open_azure: Callable[..., Store], wire: Any, sync_transport: Any
) -> None:
    store = open_azure(transport=sync_transport)
    session = "turns"
    for turn in range(120):
        store.append(session, records(f"t{turn}"))
    store.read(session, -50)
    wire.reset()
    for turn in range(5):
        assert len(store.read(session, -50)) == 50
        store.append(session, records(f"u{turn}"))
    methods = [method for method, _, _ in wire.requests]
    assert methods == ["GET", "PUT"] * 5, wire.requests


def test_cold_reads_are_small(
    open_azure: Callable[..., Store], wire: Any, sync_transport: Any
) -> None:
    writer = open_azure(prefix="cold")
    for n in range(40):
        writer.append("long", [Record(f"r{n}.{k}", b"x" * 100) for k in range(25)])
    writer.append("short", records("s"))
    reader = open_azure(prefix="cold", transport=sync_transport)
    assert reader.read("short") == records("s")
    assert reader.read("short", -1) == records("s")[-1:]
    assert len(wire.requests) == 2  # one request each, small session
    wire.reset()
    assert [r.id for r in reader.read("long", -3)] == ["r39.22", "r39.23", "r39.24"]
    assert len(wire.requests) <= 2
    assert reader.read("missing", -3) == [] and reader.read("missing") == []


def test_segments_roll_on_azurite(open_azure: Callable[..., Store], blob_service: Any) -> None:
    store = open_azure(prefix="roll", segment_blocks=5)
    log: list[Record] = []
    for n in range(14):
        store.append("s", records(f"b{n}", n % 2 + 1))
        log += records(f"b{n}", n % 2 + 1)
    segments = blob_service.names("roll/chatkeep-v2/_/s/")
    assert len(segments) >= 4
    cold = open_azure(prefix="roll", segment_blocks=5)
    assert cold.read("s") == log
    assert cold.read("s", -9) == log[-9:]
    assert cold.read("s", 3, 17) == log[3:17]
    store.delete("s")
    assert blob_service.names("roll/") == []


def test_oversized_batch_on_azurite(open_azure: Callable[..., Store], blob_service: Any) -> None:
    store = open_azure(prefix="big")
    big = [Record(f"big{n}", bytes([n]) * (1024 * 1024)) for n in range(5)]  # 5 MiB
    store.append("s", records("a"))
    store.append("s", big)
    store.append("s", records("b"))
    names = blob_service.names("big/chatkeep-v2/_/s/")
    assert any("/x/" in name for name in names), names
    cold = open_azure(prefix="big")
    assert cold.read("s", -3) == big[-1:] + records("b")
    assert cold.read("s") == records("a") + big + records("b")
    store.append("s", big)  # retry of the oversized batch: no-op
    assert [r.id for r in cold.read("s", -3)] == ["big4", "b-0", "b-1"]
    store.delete("s")
    assert blob_service.names("big/") == []


def test_listing_with_hostile_and_long_ids(open_azure: Callable[..., Store]) -> None:
    store = open_azure(prefix="listing")
    ids = [
        "plain",
        "a/b",
        "../up",
        "~7e",
        "\u00e9t\u00e9",
        "\U0001f600" * 200,  # hashed folder name; its id comes from metadata
        "\U0001f600" * 199 + "x",
        "user/" + "\u4e2d" * 300,
    ]
    for session in ids:
        store.append(session, records("r", 1))
    assert sorted(store.list_sessions()) == sorted(ids)
    assert sorted(store.list_sessions("\U0001f600")) == sorted(ids[5:7])
    assert list(store.list_sessions("user/")) == [ids[7]]
    assert list(store.list_sessions("a")) == ["a/b"]
    assert list(store.list_sessions("nothing")) == []
    for session in ids:
        assert store.read(session) == records("r", 1)
    store.delete(ids[5])
    assert ids[5] not in set(store.list_sessions())


def test_container_is_created_unless_forbidden(blob_service: Any) -> None:
    url = blob_service.url().replace(blob_service.container, "chatkeep-fresh-container", 1)
    store = open_store(url)
    try:
        assert store.read("s") == []
        assert list(store.list_sessions()) == []
        store.append("s", records("a"))
        assert store.read("s") == records("a")
    finally:
        store.close()
    forbidden = blob_service.url(create_container="false").replace(
        blob_service.container, "chatkeep-absent-container", 1
    )
    store = open_store(forbidden)
    try:
        with pytest.raises(AzureBlobConfigError, match="does not exist"):
            store.append("s", records("a"))
    finally:
        store.close()


def test_wrong_key_is_access_denied_without_leaking(blob_service: Any) -> None:
    if blob_service.endpoint is None:
        pytest.skip("needs the emulator's development account")
    wrong = "d3Jvbmcta2V5LXdyb25nLWtleS13cm9uZy1rZXk="
    connection = (
        f"DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey={wrong};"
        f"BlobEndpoint={blob_service.endpoint};"
    )
    url = f"azblob://{blob_service.container}/x?connection_string={quote(connection, safe='')}"
    store = open_store(url)
    try:
        with pytest.raises(AzureBlobAccessDenied) as raised:
            store.append("s", records("a"))
        text = str(raised.value) + repr(raised.value)
        assert wrong not in text and "AccountKey" not in text
        assert raised.value.__cause__ is None  # the SDK's text (with signatures) is dropped
        assert "403" in text
    finally:
        store.close()


def test_unreachable_service_is_store_unavailable() -> None:
    connection = (
        "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;"
        "AccountKey=c2VjcmV0;BlobEndpoint=http://127.0.0.1:9/devstoreaccount1;"
    )
    store = open_store(
        "azblob://chats/x?retries=0&connect_timeout=1&connection_string="
        + quote(connection, safe="")
    )
    try:
        with pytest.raises(StoreUnavailable) as raised:
            store.append("s", records("a"))
        assert "c2VjcmV0" not in str(raised.value)
    finally:
        store.close()


def _dev_key(blob_service: Any) -> str:
    fields = dict(
        piece.split("=", 1)
        for piece in blob_service.options["connection_string"].split(";")
        if piece
    )
    return str(fields["AccountKey"])


def test_account_key_sas_and_environment_auth(
    blob_service: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    if blob_service.endpoint is None:
        pytest.skip("needs the emulator's development account")
    from datetime import datetime, timedelta, timezone

    from azure.storage.blob import ContainerSasPermissions, generate_container_sas

    key = _dev_key(blob_service)
    base = f"azblob://{blob_service.container}/auth?api_version=2021-12-02"
    endpoint = quote(blob_service.endpoint, safe="")
    keyed = open_store(f"{base}&account_url={endpoint}&account_key={quote(key, safe='')}")
    sas = generate_container_sas(
        "devstoreaccount1",
        blob_service.container,
        account_key=key,
        permission=ContainerSasPermissions(
            read=True, add=True, create=True, write=True, delete=True, list=True
        ),
        expiry=datetime.now(timezone.utc) + timedelta(hours=1),
    )
    signed = open_store(f"{base}&account_url={endpoint}", sas_token=sas)
    monkeypatch.setenv("AZURE_STORAGE_CONNECTION_STRING", blob_service.options["connection_string"])
    from_environment = open_store(base)
    try:
        keyed.append("k", records("a"))
        assert signed.read("k") == records("a")
        signed.append("k", records("b"))
        assert from_environment.read("k") == records("a") + records("b")
        assert sorted(signed.list_sessions()) == ["k"]
        assert "sig=" not in repr(signed.backend) and key not in repr(keyed.backend)
        keyed.delete("k")
        assert from_environment.read("k") == []
    finally:
        for store in (keyed, signed, from_environment):
            store.close()


def test_async_api_on_azurite(open_azure: Callable[..., Store]) -> None:
    store = open_azure(prefix="async", segment_blocks=4)

    async def scenario() -> tuple[list[Record], list[Record], list[str]]:
        await asyncio.gather(*(store.aappend(f"s{n}", records(f"a{n}")) for n in range(3)))
        for n in range(6):
            await store.aappend("s0", records(f"b{n}", 1))
        await store.aappend("s0", records("b2", 1))  # retry: no-op
        tail = await store.aread("s0", -3)
        everything = await store.aread("s0")
        listed = [session async for session in store.alist_sessions("s")]
        await store.adelete("s2")
        return tail, everything, listed

    tail, everything, listed = asyncio.run(scenario())
    expected = records("a0") + [r for n in range(6) for r in records(f"b{n}", 1)]
    assert everything == expected and tail == expected[-3:]
    assert sorted(listed) == ["s0", "s1", "s2"]
    # The same store from another event loop, and from sync code.
    assert asyncio.run(store.aread("s2")) == []
    assert store.read("s1") == records("a1")
    asyncio.run(store.aclose())


def test_async_use_then_close_releases_connections(open_azure: Callable[..., Store]) -> None:
    import gc
    import os
    import threading

    def cycle() -> None:
        store = open_azure()
        asyncio.run(store.aappend("s", records("a")))
        assert asyncio.run(store.aread("s")) == records("a")
        store.close()

    cycle()
    gc.collect()
    before = len(os.listdir("/proc/self/fd")), threading.active_count()
    for _ in range(10):
        cycle()
    gc.collect()
    after = len(os.listdir("/proc/self/fd")), threading.active_count()
    assert after[0] - before[0] <= 2, "closing left sockets open"
    assert after[1] <= before[1], "closing left the store's event loop thread running"


def test_conditional_appends_across_rolls(
    open_azure: Callable[..., Store], blob_service: Any
) -> None:
    """append_if finds the last record wherever it is: after ROLL frames, at the start of
    a new segment, in a fresh handle."""
    store = open_azure(prefix="cond-roll", segment_blocks=4)
    last: str | None = None
    log: list[Record] = []
    for n in range(11):
        batch = records(f"c{n}", n % 2 + 1)
        store.append_if("s", batch, after=last)
        log += batch
        last = batch[-1].id
        for stale in (None, log[-2].id if len(log) > 1 else "nowhere"):
            with pytest.raises(AppendConflict):
                store.append_if("s", records(f"late{n}"), after=stale)
    assert len(blob_service.names("cond-roll/chatkeep-v2/_/s/")) >= 3
    cold = open_azure(prefix="cond-roll", segment_blocks=4)
    with pytest.raises(AppendConflict) as error:
        cold.append_if("s", records("x"), after="c0-0")
    assert error.value.expected == "c0-0"
    cold.append_if("s", records("x"), after=last)
    assert cold.read("s") == [*log, *records("x")]
    cold.append_if("s", records("x"), after="anything")  # an exact retry: a no-op
    assert store.read("s") == [*log, *records("x")]


def test_conditional_append_after_an_oversized_batch(open_azure: Callable[..., Store]) -> None:
    store = open_azure(prefix="cond-big")
    big = [Record(f"big{n}", bytes([n]) * (1024 * 1024)) for n in range(5)]  # 5 MiB
    store.append_if("s", big, after=None)
    cold = open_azure(prefix="cond-big")
    with pytest.raises(AppendConflict):
        cold.append_if("s", records("a"), after="big0")
    cold.append_if("s", records("a"), after="big4")
    assert [r.id for r in store.read("s", -3)] == ["big4", "a-0", "a-1"]


def test_refused_conditional_append_creates_nothing(
    open_azure: Callable[..., Store], blob_service: Any
) -> None:
    store = open_azure(prefix="cond-none")
    with pytest.raises(AppendConflict):
        store.append_if("s", records("a"), after="m1")
    assert blob_service.names("cond-none/") == []
    assert list(store.list_sessions()) == []
    store.append_if("s", records("a"), after=None)
    with pytest.raises(AppendConflict):
        store.append_if("s", records("b"), after=None)
    assert store.read("s") == records("a")


@pytest.mark.parametrize("kind", ["garbage", "truncated"])
def test_a_damaged_last_block_leaves_the_session_appendable(
    open_azure: Callable[..., Store], kind: str
) -> None:
    from chatkeep.core import CorruptRecord

    store = open_azure()
    for n in range(4):
        store.append("s", records(f"b{n}", 1))
    store.backend.chatkeep_damage("s", 3, kind)  # type: ignore[attr-defined]
    with pytest.raises(CorruptRecord) as error:
        store.read("s", -1)
    assert error.value.position == 3
    store.append("s", records("after", 1))  # salvaged: the next block goes after the damage
    assert store.read("s", -1) == records("after", 1)
    assert store.read("s", 0, 3) == [r for n in range(3) for r in records(f"b{n}", 1)]
    with pytest.raises(CorruptRecord) as error:
        store.read("s")
    assert error.value.position == 3
