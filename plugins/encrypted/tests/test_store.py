"""The encryption wrapper over real stores: what lands at rest, what is refused, and that
no key ever shows."""

from __future__ import annotations

import logging
import uuid
from pathlib import Path

import pytest

from chatkeep.core import (
    AppendConflict,
    CorruptRecord,
    InvalidOption,
    Message,
    PluginError,
    Record,
    RecordConflict,
    encode_records,
    new_id,
    open_store,
    read_view,
)
from chatkeep.encrypted import DecryptionError, EncryptedStore

from .conftest import KEYS, OLD, PRIMARY


@pytest.fixture
def path(tmp_path: Path) -> str:
    return str(tmp_path / "chats.db")


def sid() -> str:
    return f"s-{uuid.uuid4().hex}"


def test_data_at_rest_is_ciphertext_bound_to_its_place(path: str) -> None:
    store = open_store(f"encrypted+sqlite:///{path}")
    raw = open_store(f"sqlite:///{path}")
    session = sid()
    store.append(session, [Record("m1", b"the launch code is 0000")])
    assert store.read(session) == [Record("m1", b"the launch code is 0000")]
    at_rest = raw.read(session)[0]
    assert at_rest.id == "m1" and b"launch" not in at_rest.data
    assert b"launch" not in Path(path).read_bytes()
    raw.append(sid(), [at_rest])  # the same bytes copied into another session ...
    other = next(s for s in raw.list_sessions() if s != session)
    with pytest.raises(DecryptionError) as caught:  # ... are refused there
        store.read(other)
    assert caught.value.session_id == other and caught.value.position == 0
    assert isinstance(caught.value, CorruptRecord)


def test_retries_conflicts_and_conditions_pass_through() -> None:
    name = f"memory://{uuid.uuid4().hex}"
    store = open_store(f"encrypted+{name}")
    session = sid()
    store.append(session, [Record("a", b"1")])
    store.append(session, [Record("a", b"1"), Record("b", b"2")])  # a retried record: no-op
    assert [r.id for r in store.read(session)] == ["a", "b"]
    with pytest.raises(RecordConflict):
        store.append(session, [Record("a", b"changed")])
    store.append_if(session, [Record("c", b"3")], after="b")
    with pytest.raises(AppendConflict):
        store.append_if(session, [Record("d", b"4")], after="b")
    assert store.capabilities == open_store(name).capabilities


def test_tampering_is_reported_at_its_position(path: str) -> None:
    store = open_store(f"encrypted+sqlite:///{path}")
    session = sid()
    store.append(
        session,
        encode_records([Message.user(f"m{n}", message_id=new_id()) for n in range(5)]),
    )
    backend = store.backend
    assert isinstance(backend, EncryptedStore)
    raw = backend.inner
    victim = raw.read(session, 3, 4)[0]
    import sqlite3

    connection = sqlite3.connect(path)
    damaged = victim.data[:-1] + bytes([victim.data[-1] ^ 1])  # one bit of the tag
    connection.execute(
        "UPDATE chatkeep_records SET data = ? WHERE data = ?", (damaged, victim.data)
    )
    connection.commit()
    connection.close()
    with pytest.raises(DecryptionError) as caught:
        read_view(store, session)
    assert caught.value.position == 3 and caught.value.record_id == victim.id
    with pytest.raises(DecryptionError) as tail:
        store.read(session, -2)
    assert tail.value.position == 3
    assert len(store.read(session, 0, 3)) == 3  # the records before it are fine


def test_a_store_without_the_key_cannot_read(path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    session = sid()
    open_store(f"encrypted+sqlite:///{path}").append(session, [Record("a", b"x")])
    other_key = "k9:" + "A" * 43
    store = open_store(f"encrypted+sqlite:///{path}", keys=other_key)
    with pytest.raises(DecryptionError, match="key id 'primary', which is not configured"):
        store.read(session)
    monkeypatch.delenv("CHATKEEP_ENCRYPTION_KEYS")
    with pytest.raises(InvalidOption, match="CHATKEEP_ENCRYPTION_KEYS"):
        open_store(f"encrypted+sqlite:///{path}")
    assert not Path(path + "-never").exists()


def test_plaintext_records_are_refused_unless_allowed(path: str) -> None:
    session = sid()
    open_store(f"sqlite:///{path}").append(session, [Record("old", b"written before")])
    with pytest.raises(DecryptionError, match="not encrypted"):
        open_store(f"encrypted+sqlite:///{path}").read(session)
    lenient = open_store(f"encrypted+sqlite:///{path}", allow_plaintext=True)
    assert lenient.read(session) == [Record("old", b"written before")]


def test_no_key_material_in_reprs_errors_or_logs(
    path: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    store = open_store(f"encrypted+sqlite:///{path}", keys=KEYS)
    texts = [repr(store), repr(store.backend), str(store.url)]
    for bad in ["k:" + PRIMARY[:-4], f"k:{PRIMARY},k:{OLD}", "k:" + PRIMARY + "AAAA"]:
        with pytest.raises(InvalidOption) as caught:
            open_store(f"encrypted+sqlite:///{path}", keys=bad)
        texts.append(str(caught.value))
    session = sid()
    store.append(session, [Record("a", b"x")])
    with pytest.raises(DecryptionError) as refused:
        open_store(f"encrypted+sqlite:///{path}", keys="z:" + OLD).read(session)
    texts += [str(refused.value), caplog.text]
    for text in texts:
        assert PRIMARY not in text and OLD not in text and PRIMARY[:20] not in text


def test_wrapping_needs_an_inner_url() -> None:
    with pytest.raises(PluginError, match=r"encrypted\+<inner URL>"):
        open_store("encrypted")


def test_the_wrapper_keeps_the_inner_stores_options() -> None:
    url = f"encrypted+memory://{uuid.uuid4().hex}"
    acme = open_store(url, namespace="acme")
    other = open_store(url, namespace="other")
    acme.append("s", [Record("a", b"for acme")])
    assert other.read("s") == [] and acme.read("s") == [Record("a", b"for acme")]


def test_never_keeps_a_fulltext_index_and_a_search_decrypts_and_scans(path: str) -> None:
    import asyncio

    from chatkeep.core import (
        AgentSession,
        HistoryProvider,
        Message,
        SearchProgress,
        TextContent,
        search,
    )

    inner = open_store(f"sqlite:///{path}")
    assert inner.supports("fulltext")
    store = open_store(f"encrypted+sqlite:///{path}")
    assert not store.supports("fulltext")
    message = Message("user", [TextContent("the Oslo invoice")], message_id="m1")
    asyncio.run(HistoryProvider(store).save(AgentSession("s"), [message]))
    progress: list[SearchProgress] = []
    hits = list(search(store, "oslo invoice", progress=progress.append))
    assert [(hit.session_id, hit.message_id) for hit in hits] == [("s", "m1")]
    assert progress and not progress[0].indexed
    # The inner store was handed ciphertext: its index holds no word of the message.
    assert list(search(inner, "oslo", use_index=True)) == []
    assert not inner.backend.chatkeep_storage_contains(b"oslo")  # type: ignore[attr-defined]
