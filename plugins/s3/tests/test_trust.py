"""Trust: tenants that cannot touch each other, retries that are no-ops across processes,
damage reported and contained, no credential in any repr, error or log line, and the way
from the 0.1 layout."""

from __future__ import annotations

import io
import json
import logging
import os
import subprocess
import sys
import traceback
from typing import Any

import pytest

from chatkeep.core import (
    AppendConflict,
    CorruptRecord,
    InvalidOption,
    Record,
    RecordConflict,
    StoreUnavailable,
    open_store,
)
from chatkeep.s3.errors import LegacyLayout
from chatkeep.s3.legacy import legacy_folder


def recs(count: int, tag: str = "r", start: int = 0) -> list[Record]:
    return [Record(f"{tag}-{n}", f"{tag}:{n}".encode()) for n in range(start, start + count)]


# -- tenants ------------------------------------------------------------------------------


def test_nested_prefixes_never_see_or_delete_each_other(s3_endpoint: Any, open_s3: Any) -> None:
    root = f"t-{os.urandom(4).hex()}"
    outer, inner = open_s3(s3_endpoint.url(root)), open_s3(s3_endpoint.url(f"{root}/eu"))
    # An inner prefix shaped like a session folder of the outer store, too.
    shaped = open_s3(s3_endpoint.url(f"{root}/chatkeep-v2x/_/cl"))
    outer.append("s", recs(1, "outer"))
    for store in (inner, shaped):
        store.append("eu", recs(1, "inner"))
        store.append("s", recs(1, "inner"))
    assert list(outer.list_sessions()) == ["s"]
    assert sorted(inner.list_sessions()) == ["eu", "s"]
    outer.delete("eu")
    outer.delete("s")
    assert inner.read("eu") == recs(1, "inner") and shaped.read("s") == recs(1, "inner")
    inner.delete("s")
    outer.append("s", recs(1, "outer"))
    assert outer.read("s") == recs(1, "outer") and inner.read("s") == []
    with pytest.raises(InvalidOption, match="chatkeep-v2"):
        open_s3(s3_endpoint.url(f"{root}/chatkeep-v2/_"))


@pytest.mark.parametrize("other", [None, "acme/eu", "acmecorp", "acme:prod"])
def test_namespaces_are_isolated_on_every_path(
    s3_url: str, open_s3: Any, other: str | None
) -> None:
    mine = open_s3(s3_url, namespace="acme")
    theirs = open_s3(s3_url, **({} if other is None else {"namespace": other}))
    mine.append("s", recs(2, "mine"))
    theirs.append("s", recs(1, "theirs"))
    theirs.append("only-theirs", recs(1))
    assert mine.read("s") == recs(2, "mine") and theirs.read("s") == recs(1, "theirs")
    assert mine.read("s", -1) == recs(1, "mine", start=1)
    assert list(mine.list_sessions()) == ["s"]
    assert sorted(theirs.list_sessions()) == ["only-theirs", "s"]
    mine.append("s", recs(1, "theirs"))  # ids are per namespace: not a retry of theirs
    assert mine.read("s") == recs(2, "mine") + recs(1, "theirs")
    mine.delete("s")
    mine.delete("only-theirs")
    assert theirs.read("s") == recs(1, "theirs") and theirs.read("only-theirs") == recs(1)
    with pytest.raises(AppendConflict):
        mine.append_if("s", recs(1, "x"), after="theirs-0")


def test_the_url_and_the_keyword_name_the_same_namespace(s3_url: str, open_s3: Any) -> None:
    by_url = open_s3(s3_url + "&namespace=t%3A1")
    by_keyword = open_s3(s3_url, namespace="t:1")
    by_url.append("s", recs(1))
    assert by_keyword.read("s") == recs(1)
    assert "t:1" in repr(by_keyword)


# -- retries across processes -----------------------------------------------------------

_CHILD = """
import json, os, sys
from chatkeep.core import Record, open_store
url, session, batch, die = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), sys.argv[4]
store = open_store(url)
try:
    store.append(session, [Record(i, d.encode()) for i, d in batch])
except Exception as exc:
    print(type(exc).__name__)
    sys.exit(0)
print("ok", flush=True)
if die == "die":
    os._exit(0)  # no close, no flush: as if killed
store.close()
"""


def _child(url: str, session: str, batch: list[tuple[str, str]], die: bool = False) -> str:
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, url, session, json.dumps(batch), "die" if die else ""],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_a_batch_resent_by_another_process_after_other_appends_stores_nothing(
    s3_url: str, open_s3: Any
) -> None:
    url = s3_url + "&rollover_segments=4"  # the retry lands beyond several roll-overs
    batch = [("sent-0", "a"), ("sent-1", "b"), ("sent-2", "c")]
    assert _child(url, "s", batch, die=True) == "ok"
    store = open_s3(url)
    for n in range(10):
        store.append("s", recs(2, f"later{n}"))
    log = store.read("s")
    assert _child(url, "s", batch) == "ok"
    assert store.read("s") == log
    assert _child(url, "s", [("sent-1", "b"), ("fresh", "new")]) == "ok"
    assert store.read("s") == [*log, Record("fresh", b"new")]
    assert _child(url, "s", [("other", "o"), ("sent-0", "different")]) == "RecordConflict"
    assert store.read("s") == [*log, Record("fresh", b"new")]


def test_an_id_reused_with_other_data_is_found_deep_in_the_log_at_no_extra_cost(
    s3_url: str, open_s3: Any, count_requests: Any
) -> None:
    store = open_s3(s3_url, rollover_segments=4)
    store.append("s", [Record("early", b"v1")])
    for n in range(60):
        store.append("s", recs(1, "later", start=n))
    fresh = open_s3(s3_url)
    with pytest.raises(RecordConflict) as caught:
        fresh.append("s", [Record("new", b"n"), Record("early", b"v2")])
    assert (caught.value.session_id, caught.value.record_id) == ("s", "early")
    requests = count_requests(fresh)
    fresh.append("s", recs(2, "fresh"))  # new ids: no request but the PUT
    assert dict(requests) == {"PutObject": 1}
    assert fresh.read("s", -2) == recs(2, "fresh")


# -- conditional appends ------------------------------------------------------------------


def test_append_if_is_the_same_single_put(s3_url: str, open_s3: Any, count_requests: Any) -> None:
    store = open_s3(s3_url)
    store.append_if("s", recs(1), after=None)
    requests = count_requests(store)
    store.append_if("s", recs(1, start=1), after="r-0")
    assert dict(requests) == {"PutObject": 1}
    with pytest.raises(AppendConflict):
        store.append_if("s", recs(1, start=2), after="r-0")
    store.append_if("s", recs(1, start=1), after="r-0")  # an exact retry: a no-op
    assert store.read("s") == recs(2)


def test_a_conditional_append_that_loses_its_position_is_refused(
    s3_url: str, open_s3: Any, faulty: Any
) -> None:
    """moto's conditional writes are not atomic under truly concurrent requests, so the race
    is produced deterministically: another writer appends just before our PUT leaves."""
    one, two = open_s3(s3_url), open_s3(s3_url)
    one.append("s", recs(1))
    assert two.read("s") == recs(1)
    faults = faulty(one)
    faults.plan(
        "put_object",
        faults.first(lambda: two.append("s", recs(1, "two"))),
        when=lambda kwargs: kwargs.get("IfNoneMatch") == "*",
    )
    with pytest.raises(AppendConflict):
        one.append_if("s", recs(1, start=1), after="r-0")
    assert one.read("s") == recs(1) + recs(1, "two")
    one.append_if("s", recs(1, start=1), after="two-0")
    assert two.read("s") == recs(1) + recs(1, "two") + recs(1, start=1)


# -- damage -------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["missing", "truncated", "garbage"])
@pytest.mark.parametrize("rolled", [False, True])
def test_the_damage_hook_is_reported_and_contained(
    s3_url: str, open_s3: Any, kind: str, rolled: bool
) -> None:
    store = open_s3(s3_url, rollover_segments=4)
    log = []
    for n in range(10 if rolled else 3):
        log += recs(1, start=n)
        store.append("s", recs(1, start=n))
    store.chatkeep_damage("s", 1, kind)
    for reader in (store, open_s3(s3_url)):
        with pytest.raises(CorruptRecord) as caught:
            reader.read("s")
        assert (caught.value.session_id, caught.value.position) == ("s", 1)
        assert reader.read("s", 0, 1) == log[:1]
    store.append("s", recs(1, "after"))
    assert open_s3(s3_url).read("s", -1) == recs(1, "after")
    with pytest.raises(CorruptRecord):
        open_s3(s3_url).read("s")


def test_delete_erases_the_bytes(s3_url: str, open_s3: Any) -> None:
    store = open_s3(s3_url, rollover_segments=2)
    marker = os.urandom(8).hex().encode()
    for n in range(5):
        store.append("s", [Record(f"m{n}", b"secret:" + marker)])
    store.append("k", [Record("k", b"kept")])
    assert store.chatkeep_storage_contains(marker)
    store.delete("s")
    assert not store.chatkeep_storage_contains(marker)
    assert store.chatkeep_storage_contains(b"kept")
    assert store.chatkeep_durability() == "power"


# -- no credential anywhere ---------------------------------------------------------------

_SECRETS = {
    "aws_access_key_id": "AKIACHATKEEPLEAK1",
    "aws_secret_access_key": "chatkeep-secret-key-leak",
    "aws_session_token": "chatkeep-session-token-leak",
}


def test_no_credential_in_reprs_errors_tracebacks_or_debug_logs(s3_endpoint: Any) -> None:
    captured = io.StringIO()
    handler = logging.StreamHandler(captured)
    handler.setLevel(logging.DEBUG)
    handler.setFormatter(logging.Formatter("%(name)s %(message)s"))
    root = logging.getLogger()
    old_level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    texts: list[str] = []
    try:
        store = open_store(s3_endpoint.url(), **_SECRETS)
        store.append("s", recs(2))
        store.read("s", -1)
        store.delete("s")
        texts += [repr(store), repr(store.backend), repr(store.backend.options)]
        missing = s3_endpoint.url().replace(s3_endpoint.bucket, "no-such-bucket-here", 1)
        broken = open_store(missing, **_SECRETS)
        try:
            broken.append("s", recs(1))
        except StoreUnavailable as exc:
            texts.append("".join(traceback.format_exception(exc)))
        broken.close()
        for bad in (
            "s3://b/p?endpoint_url=http://me:chatkeep-secret-key-leak@h",
            "s3://AKIACHATKEEPLEAK1:chatkeep-secret-key-leak@b/p",
            "s3://b/p?aws_session_token=chatkeep-session-token-leak",
        ):
            with pytest.raises(InvalidOption) as caught:
                open_store(bad)
            texts.append("".join(traceback.format_exception(caught.value)))
        store.close()
    finally:
        root.removeHandler(handler)
        root.setLevel(old_level)
    log = captured.getvalue()
    assert "Authorization" in log or "authorization" in log  # botocore did log its requests
    everything = log + "\n".join(texts)
    for secret in _SECRETS.values():
        assert secret not in everything, secret


# -- the 0.1 layout -----------------------------------------------------------------------


def _write_legacy_session(store: Any, session_id: str, batches: list[list[Record]]) -> None:
    folder = legacy_folder(store.layout.root, session_id)
    if "~" in folder:
        store.bucket.put(f"{folder}id", session_id.encode())
    position = 0
    for batch in batches:
        header = json.dumps(
            {"start": position, "ids": [r.id for r in batch], "sizes": [len(r.data) for r in batch]}
        ).encode()
        body = b"CKS1" + len(header).to_bytes(4, "big") + header + b"".join(r.data for r in batch)
        store.bucket.put(f"{folder}seg/{position:016d}", body)
        position += len(batch)


def test_a_session_in_the_old_layout_is_refused_until_migrated(s3_url: str, open_s3: Any) -> None:
    from chatkeep.s3.migrate import main

    old = open_s3(s3_url, legacy_check=False)
    _write_legacy_session(old, "chat", [recs(2), recs(3, start=2)])
    _write_legacy_session(old, "x" * 300, [recs(1)])
    store = open_s3(s3_url)
    with pytest.raises(LegacyLayout, match="migrate"):
        store.read("chat")
    with pytest.raises(LegacyLayout):
        store.append("chat", recs(1, "new"))
    assert old.read("chat") == []  # with the check off, the old data is simply not there
    assert main([s3_url]) == 0
    assert store.read("chat") == recs(5)
    assert open_s3(s3_url).read("x" * 300) == recs(1)
    assert main([s3_url, "--delete"]) == 0  # again: copies nothing twice, then removes
    fresh = open_s3(s3_url)
    assert fresh.read("chat") == recs(5)
    assert sorted(fresh.list_sessions()) == ["chat", "x" * 300]
    assert not any(
        item.key.startswith(legacy_folder(old.layout.root, "chat"))
        for item in old.bucket.list_objects(old.layout.root)
    )
