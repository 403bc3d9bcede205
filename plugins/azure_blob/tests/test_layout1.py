"""Layout 1 (``layout=1``): the old blob names, read and written as earlier releases did;
the once-per-handle check that warns a layout-2 handle about them; migrating them."""

from __future__ import annotations

import asyncio
import logging
import re
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from chatkeep.azure_blob import AzureBlobConfigError
from chatkeep.azure_blob import _operations as ops
from chatkeep.core import InvalidOption, Record, Store, open_store
from chatkeep.core.transfer import migrate, verify

LOGGER = "chatkeep.azure_blob"


def records(tag: str, count: int = 2, size: int = 10) -> list[Record]:
    return [Record(f"{tag}-{n}", f"{tag}/{n}".encode().ljust(size, b"~")) for n in range(count)]


def warnings_of(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == LOGGER and r.levelno == logging.WARNING]


# -- the option ---------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["0", "3", "v1", "", " ", "1.0", 0, 3, True, 1.0, None])
def test_bad_layout_values_are_refused(value: Any) -> None:
    with pytest.raises(InvalidOption, match="'layout' must be 1 or 2"):
        open_store("azblob://chats/p?connection_string=UseDevelopmentStorage%3Dtrue", layout=value)


def test_bad_layout_in_the_url_is_refused() -> None:
    with pytest.raises(AzureBlobConfigError, match="'layout' must be 1 or 2"):
        open_store("azblob://chats/p?layout=3&connection_string=UseDevelopmentStorage%3Dtrue")


@pytest.mark.parametrize("where", ["url", "keyword"])
def test_layout_1_with_a_namespace_is_refused(where: str) -> None:
    url = "azblob://chats/p?connection_string=UseDevelopmentStorage%3Dtrue&namespace=acme"
    with pytest.raises(InvalidOption, match="layout=1 has no namespaces"):
        if where == "url":
            open_store(url + "&layout=1")
        else:
            open_store(url, layout=1)


def test_layout_values_and_reprs() -> None:
    url = "azblob://chats/p?connection_string=UseDevelopmentStorage%3Dtrue"
    for store, layout, base in (
        (open_store(url), 2, "p/chatkeep-v2/_/"),
        (open_store(url + "&layout=2"), 2, "p/chatkeep-v2/_/"),
        (open_store(url + "&layout=1"), 1, "p/"),
        (open_store(url, layout=1), 1, "p/"),
        (open_store(url + "&layout=2", layout="1"), 1, "p/"),  # the keyword wins
    ):
        settings = store.backend._settings  # type: ignore[attr-defined]
        assert (settings.layout, settings.base) == (layout, base)
        assert ("layout=1" in repr(store.backend)) == (layout == 1)
        store.close()


# -- layout 1 on Azurite ------------------------------------------------------------------


def test_layout_1_writes_and_reads_the_old_names(
    open_azure: Callable[..., Store], blob_service: Any
) -> None:
    tag = f"l1-{uuid.uuid4().hex[:8]}"
    old = open_azure(tag, layout=1, segment_blocks=4)
    log: list[Record] = []
    for n in range(6):
        old.append("user/42", records(f"b{n}"))
        log += records(f"b{n}")
    big = [Record("big", b"B" * (5 * 1024 * 1024))]  # an oversized batch: a block blob
    old.append("user/42", big)
    old.append("plain", records("p", 1))
    names = blob_service.names(f"{tag}/")
    # Exactly the names earlier releases wrote: PREFIX/{folder}/{segment} and x/{token}.
    segments = [n for n in names if re.fullmatch(rf"{tag}/user~2f42/\d{{10}}", n)]
    assert len(segments) >= 2 and segments[0] == f"{tag}/user~2f42/0000000000"
    assert any(re.fullmatch(rf"{tag}/user~2f42/x/[0-9a-f]{{32}}", n) for n in names)
    assert f"{tag}/plain/0000000000" in names
    assert all("chatkeep-v2" not in n for n in names)
    assert len(names) == len(segments) + 2
    cold = open_azure(tag, layout=1, segment_blocks=4)
    assert cold.read("user/42") == [*log, *big]
    assert cold.read("user/42", -3) == [*log[-2:], *big]
    assert sorted(cold.list_sessions()) == ["plain", "user/42"]
    layout2 = open_azure(tag)
    assert layout2.read("user/42") == [] and list(layout2.list_sessions()) == []
    cold.delete("user/42")
    assert blob_service.names(f"{tag}/") == [f"{tag}/plain/0000000000"]


def test_layout_1_and_2_share_a_prefix_without_touching_each_other(
    open_azure: Callable[..., Store], blob_service: Any
) -> None:
    tag = f"mix-{uuid.uuid4().hex[:8]}"
    old = open_azure(tag, layout=1)
    new = open_azure(tag)
    nested = open_azure(f"{tag}/eu")  # a nested layout-2 store: a folder "eu" to layout 1
    new.append("s", records("new"))
    nested.append("s", records("nested"))
    old.append("s", records("old"))
    # Layout 2's tree is not a layout-1 session; the nested store is (the known weakness).
    assert sorted(old.list_sessions()) == ["eu", "s"]
    assert old.read("chatkeep-v2") == [] and old.read("eu") == []
    for session in ("chatkeep-v2", "eu"):
        old.delete(session)  # removes only that session's own blob shapes: nothing here
    assert new.read("s") == records("new") and nested.read("s") == records("nested")
    # A real layout-1 session called "chatkeep-v2" is listed, read and deleted alone.
    old.append("chatkeep-v2", records("odd"))
    assert sorted(old.list_sessions()) == ["chatkeep-v2", "eu", "s"]
    assert old.read("chatkeep-v2") == records("odd")
    old.delete("chatkeep-v2")
    assert sorted(old.list_sessions()) == ["eu", "s"]
    assert new.read("s") == records("new") and list(new.list_sessions()) == ["s"]
    assert old.read("s") == records("old")


# -- detection ----------------------------------------------------------------------------


def test_a_layout_2_handle_warns_once_about_layout_1_data(
    open_azure: Callable[..., Store],
    blob_service: Any,
    wire: Any,
    sync_transport: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    tag = f"warn-{uuid.uuid4().hex[:8]}"
    open_azure(tag, layout=1).append("old", records("o"))
    caplog.set_level(logging.WARNING, logger=LOGGER)
    store = open_azure(tag, transport=sync_transport)
    assert store.read("old") == []
    found = warnings_of(caplog)
    assert len(found) == 1
    message = found[0].getMessage()
    assert "layout=1" in message and "migrate" in message and tag in message
    assert "AccountKey" not in message and "connection_string" not in message
    lists = [r for r in wire.requests if r[0] == "GET" and "comp=list" in r[1]]
    assert len(lists) == 1 and "maxresults=20" in lists[0][1] and "delimiter" in lists[0][1]
    assert store.backend.legacy_layout_found() is True  # type: ignore[attr-defined]
    wire.reset()
    assert store.read("old") == [] and store.read("other", -5) == []
    assert list(store.list_sessions()) == []
    assert store.backend.legacy_layout_found() is True  # type: ignore[attr-defined]
    assert len(warnings_of(caplog)) == 1
    assert [r for r in wire.requests if "maxresults=20" in r[1]] == []  # never again
    # A second handle checks (and warns) once more: once per handle.
    other = open_azure(tag)
    assert list(other.list_sessions()) == []
    assert len(warnings_of(caplog)) == 2


def test_the_check_is_off_the_hot_paths_and_quiet_without_layout_1_data(
    open_azure: Callable[..., Store],
    wire: Any,
    sync_transport: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    tag = f"quiet-{uuid.uuid4().hex[:8]}"
    caplog.set_level(logging.WARNING, logger=LOGGER)
    writer = open_azure(tag)
    for n in range(3):
        writer.append("s", records(f"a{n}"))
    open_azure(f"{tag}/eu").append("s", records("nested"))  # a nested store's folder
    store = open_azure(tag, transport=sync_transport)
    store.append("s", records("b"))
    store.read("s", -2)
    store.append("s", records("c"))
    store.read("s", -2)
    assert [r for r in wire.requests if "comp=list" in r[1]] == []  # appends, warm reads
    assert store.read("fresh") == []  # the trigger: one list, one confirming HEAD of "eu"
    assert store.backend.legacy_layout_found() is False  # type: ignore[attr-defined]
    assert len([r for r in wire.requests if "maxresults=20" in r[1]]) == 1
    assert warnings_of(caplog) == []
    layout1 = open_azure(tag, layout=1, transport=sync_transport)
    wire.reset()
    assert layout1.read("missing") == []
    assert layout1.backend.legacy_layout_found() is False  # type: ignore[attr-defined]
    assert [r for r in wire.requests if "comp=list" in r[1]] == []


def test_the_async_api_checks_once_too(
    open_azure: Callable[..., Store], caplog: pytest.LogCaptureFixture
) -> None:
    tag = f"awarn-{uuid.uuid4().hex[:8]}"
    open_azure(tag, layout=1).append("old", records("o"))
    caplog.set_level(logging.WARNING, logger=LOGGER)
    store = open_azure(tag)

    async def scenario() -> tuple[list[str], list[Record], bool]:
        listed = [session async for session in store.alist_sessions()]
        read = await store.aread("old")
        return listed, read, await store.backend.alegacy_layout_found()  # type: ignore[attr-defined]

    assert asyncio.run(scenario()) == ([], [], True)
    assert len(warnings_of(caplog)) == 1


def test_the_check_on_the_fake_service_counts_its_requests(
    fake_store: Callable[..., Any], fake_service: Any
) -> None:
    old = fake_store(layout=1)
    old.append("a", records("a"))
    store = fake_store()
    before = len(fake_service.operations)
    assert store.read("a") == []
    check = fake_service.operations[before + 1 :]
    assert [type(op) for op in check] == [ops.ListTop, ops.Head]
    assert check[0] == ops.ListTop("root/", 20) and check[1].blob == "root/a/0000000000"
    assert store.legacy_layout_found() is True
    assert fake_service.count(ops.ListTop) == 1


def test_an_unreachable_service_leaves_the_check_due(
    fake_store: Callable[..., Any], fake_service: Any
) -> None:
    fake_store(layout=1).append("a", records("a"))
    store = fake_store()
    fake_service.fault(ops.ListTop, "failed")
    assert store.read("a") == []  # the read itself is unaffected
    assert fake_service.count(ops.ListTop) == 1
    assert store.legacy_layout_found() is True  # checked again, and found
    assert fake_service.count(ops.ListTop) == 2


# -- migrating ----------------------------------------------------------------------------


def test_migrate_layout_1_to_layout_2_in_place(
    open_azure: Callable[..., Store], blob_service: Any, caplog: pytest.LogCaptureFixture
) -> None:
    tag = f"mig-{uuid.uuid4().hex[:8]}"
    old = open_azure(tag, layout=1, segment_blocks=3)
    expected: dict[str, list[Record]] = {}
    for session in ("plain", "a/b", "\u00e9t\u00e9", "\U0001f600" * 200, "big"):
        log: list[Record] = []
        for n in range(5):
            batch = records(f"{len(expected)}.{n}", n + 1)
            old.append(session, batch)
            log += batch
        expected[session] = log
    expected["big"] += [Record("huge", b"H" * (5 * 1024 * 1024))]
    old.append("big", expected["big"][-1:])
    new = open_azure(tag)
    caplog.set_level(logging.WARNING, logger=LOGGER)
    assert list(new.list_sessions()) == []
    assert len(warnings_of(caplog)) == 1
    stats = migrate(old, new)
    assert stats.sessions == len(expected)
    assert stats.records_copied == sum(len(log) for log in expected.values())
    assert verify(old, new) == []
    cold = open_azure(tag)
    assert sorted(cold.list_sessions()) == sorted(expected)
    for session, log in expected.items():
        assert cold.read(session) == log
    again = migrate(old, new)  # resumable: a re-run copies nothing
    assert again.records_copied == 0 and again.records_skipped == stats.records_copied
    # The old blobs are still there until deleted with the layout-1 store; deleting them
    # leaves the copy intact.
    for session in list(old.list_sessions()):
        old.delete(session)
    assert list(old.list_sessions()) == []
    assert all(n.startswith(f"{tag}/chatkeep-v2/") for n in blob_service.names(f"{tag}/"))
    for session, log in expected.items():
        assert open_azure(tag).read(session, -2) == log[-2:]


def test_the_readme_upgrade_example_runs(
    blob_service: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    if blob_service.endpoint is None:
        pytest.skip("the example names the container 'chats' on the development account")
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    section = readme.split("## Upgrading from layout 1", 1)[1].split("\n## ", 1)[0]
    _, marker, rest = section.partition("-->\n```python\n")
    assert marker, "the example must follow its <!-- run: ... --> mark"
    code = rest.split("\n```", 1)[0]
    connection = blob_service.options["connection_string"]
    monkeypatch.setenv("AZURE_STORAGE_CONNECTION_STRING", connection)
    exec(compile(code, "README.md", "exec"), {"__name__": "readme"})
    assert re.search(r"copied 2 records of 1 sessions", capsys.readouterr().out)


# -- data written by the last release of layout 1 -----------------------------------------

GOLDEN = Path(__file__).resolve().parent / "data" / "layout1_written_by_6e42282.json"


def _upload_golden(blob_service: Any, tag: str) -> dict[str, list[Record]]:
    """Put the blobs the old release wrote (names, types, metadata, bytes) under ``tag``;
    return the sessions that release read back from them."""
    import base64
    import json

    golden = json.loads(GOLDEN.read_text())
    old_root = golden["prefix"] + "/"
    base = blob_service.prefix.strip("/") + "/" if blob_service.prefix.strip("/") else ""
    store = open_store(blob_service.url())
    client = store.backend._settings.sync_container()  # type: ignore[attr-defined]
    try:
        if not client.exists():
            client.create_container()
        for blob in golden["blobs"]:
            assert blob["name"].startswith(old_root)
            name = base + tag + "/" + blob["name"][len(old_root) :]
            data = base64.b64decode(blob["data"])
            target = client.get_blob_client(name)
            if blob["type"] == "APPENDBLOB":
                target.create_append_blob(metadata=blob["metadata"])
                if data:
                    target.append_block(data)
            else:
                target.upload_blob(data, metadata=blob["metadata"] or None)
    finally:
        client.close()
        store.close()
    return {
        session: [Record(rid, base64.b64decode(data)) for rid, data in log]
        for session, log in golden["sessions"].items()
    }


def test_data_written_by_the_last_layout_1_release_reads_and_migrates(
    open_azure: Callable[..., Store], blob_service: Any, caplog: pytest.LogCaptureFixture
) -> None:
    tag = f"gold-{uuid.uuid4().hex[:8]}"
    expected = _upload_golden(blob_service, tag)
    assert len(expected) == 5 and all(expected.values())
    old = open_azure(tag, layout=1)
    assert sorted(old.list_sessions()) == sorted(expected)
    for session, log in expected.items():
        assert old.read(session) == log
        assert old.read(session, -3) == log[-3:]
    old.append("chat-1", records("more"))  # this release appends to the old blobs
    old.append("chat-1", expected["chat-1"][-1:])  # a re-send of an old record: a no-op
    expected["chat-1"] += records("more")
    assert open_azure(tag, layout=1).read("chat-1") == expected["chat-1"]
    caplog.set_level(logging.WARNING, logger=LOGGER)
    new = open_azure(tag)
    assert new.read("chat-1") == []
    assert len(warnings_of(caplog)) == 1
    stats = migrate(old, new)
    assert stats.sessions == len(expected)
    cold = open_azure(tag)
    for session, log in expected.items():
        assert cold.read(session) == log
