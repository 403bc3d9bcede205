"""The S3 store against a real S3 endpoint over HTTP: behaviour, layout and request costs."""

from __future__ import annotations

from typing import Any

import pytest

from chatkeep.core import (
    CorruptRecord,
    InvalidOption,
    Record,
    StoreClosed,
    StoreUnavailable,
    open_store,
)
from chatkeep.s3.bucket import Bucket
from chatkeep.s3.config import S3Options
from chatkeep.s3.layout import MARKER, encode_session


def recs(count: int, tag: str = "r", start: int = 0, size: int = 0) -> list[Record]:
    pad = b"." * size
    return [Record(f"{tag}-{n}", f"{tag}:{n}".encode() + pad) for n in range(start, start + count)]


def keys_of(store: Any, session: str | None = None) -> list[tuple[str, int]]:
    """Every key under the store's namespace (or one session's folder), relative to it."""
    base = store.layout.folder(session) if session else store.layout.base
    return [(item.key[len(base) :], item.size) for item in store.bucket.list_objects(base)]


# -- the two hooks, through open_store ----------------------------------------------------


def test_open_store_by_url_declares_capabilities_and_hides_options(s3_url: str) -> None:
    secret = {"aws_access_key_id": "chatkeep-test-key", "aws_secret_access_key": "test-secret"}
    with open_store(s3_url, **secret) as store:
        assert store.name == "s3"
        assert store.capabilities == {
            "delete",
            "list_sessions",
            "close",
            "shared",
            "durable",
            "conditional",
            "namespace",
        }
        store.append("s", recs(2))
        assert store.read("s") == recs(2)
        assert "secret" not in repr(store) and "secret" not in repr(store.backend)


def test_key_layout(s3_url: str, open_s3: Any) -> None:
    store = open_s3(s3_url)
    store.append("chat/1", recs(3))
    store.append("chat/1", recs(2, start=3))
    prefix = s3_url.split("?", maxsplit=1)[0].split("/", 3)[3]
    assert store.layout.base == f"{prefix}/{MARKER}/_/"
    assert keys_of(store) == [
        (f"{encode_session('chat/1')}/log/{10**16 - 1 - 3:016d}.seg", keys_of(store)[0][1]),
        (f"{encode_session('chat/1')}/log/{10**16 - 1:016d}.seg", keys_of(store)[1][1]),
    ]
    assert all(size > 0 for _, size in keys_of(store))


# -- costs ---------------------------------------------------------------------------------


def test_a_warm_turn_is_one_list_and_one_put(
    s3_url: str, open_s3: Any, count_requests: Any
) -> None:
    store = open_s3(s3_url, rollover_segments=1000)
    for n in range(60):
        store.append("s", recs(1, start=n))
    requests = count_requests(store)
    assert store.read("s", -50) == recs(50, start=10)
    assert dict(requests) == {"ListObjectsV2": 1}  # every segment is cached: no GET
    requests.clear()
    store.append("s", recs(2, start=60))
    assert dict(requests) == {"PutObject": 1}
    requests.clear()
    assert store.read("s") == recs(62)
    assert dict(requests) == {"ListObjectsV2": 1}


def test_a_cold_tail_read_fetches_only_the_segments_it_returns(
    s3_url: str, open_s3: Any, count_requests: Any
) -> None:
    writer = open_s3(s3_url, rollover_segments=1000)
    for n in range(0, 200, 2):
        writer.append("s", recs(2, start=n))
    reader = open_s3(s3_url)
    requests = count_requests(reader)
    assert reader.read("s", -10) == recs(10, start=190)
    assert requests["ListObjectsV2"] == 1
    # The last 10 records are in the last 5 segments; not knowing the last segment's
    # length, the read may take one more.
    assert 5 <= requests["GetObject"] <= 6
    requests.clear()
    assert reader.read("s", 4, 8) == recs(4, start=4)
    assert requests == {"ListObjectsV2": 1, "GetObject": 2}


def test_a_cold_append_reads_only_the_newest_segment(
    s3_url: str, open_s3: Any, count_requests: Any
) -> None:
    writer = open_s3(s3_url, rollover_segments=1000)
    for n in range(0, 40, 2):
        writer.append("s", recs(2, start=n))
    other = open_s3(s3_url, rollover_segments=1000)  # no roll-over due: only the append
    requests = count_requests(other)
    other.append("s", recs(1, start=40))
    assert dict(requests) == {"ListObjectsV2": 1, "GetObject": 1, "PutObject": 1}
    assert writer.read("s") == recs(41)


def test_full_reads_fetch_in_parallel(s3_url: str, open_s3: Any) -> None:
    writer = open_s3(s3_url)
    expected = []
    for n in range(50):
        batch = recs(3, start=3 * n, size=100)
        writer.append("s", batch)
        expected += batch
    reader = open_s3(s3_url, max_workers=4)
    assert reader.read("s") == expected
    assert reader.read("s", 17, 101) == expected[17:101]


def test_an_unknown_session_costs_one_list(s3_url: str, open_s3: Any, count_requests: Any) -> None:
    store = open_s3(s3_url, legacy_check=False)
    requests = count_requests(store)
    assert store.read("nobody", -5) == []
    assert dict(requests) == {"ListObjectsV2": 1}
    checking = open_s3(s3_url)
    requests = count_requests(checking)
    assert checking.read("nobody", -5) == []
    assert checking.read("nobody", -5) == []
    # One more LIST, once, for a session of the 0.1 layout (see the migration tests).
    assert dict(requests) == {"ListObjectsV2": 3}


# -- other handles' changes ----------------------------------------------------------------


def test_delete_by_another_handle_is_seen_and_ids_can_be_reused(s3_url: str, open_s3: Any) -> None:
    one, two = open_s3(s3_url), open_s3(s3_url)
    one.append("s", recs(3))
    assert one.read("s") == recs(3)
    two.delete("s")
    assert one.read("s") == []
    # `one` has seen the delete: its next append starts the log afresh, same ids or not.
    one.append("s", recs(3))
    assert two.read("s") == recs(3)
    assert one.read("s", -1) == recs(1, start=2)
    two.delete("s")
    assert one.read("s", -1) == []
    one.append("s", [Record("r-0", b"other data")])
    assert two.read("s") == [Record("r-0", b"other data")]


def test_a_missing_object_is_reported_with_its_position(s3_url: str, open_s3: Any) -> None:
    store = open_s3(s3_url)
    for n in range(0, 10, 2):
        store.append("s", recs(2, start=n))
    key = store.layout.segment_key(store.layout.folder("s"), 4)
    store.bucket.delete([key])
    fresh = open_s3(s3_url)
    for start, stop in [(0, None), (3, 6), (-7, None), (0, 5)]:
        with pytest.raises(CorruptRecord) as caught:
            fresh.read("s", start, stop)
        assert caught.value.session_id == "s" and caught.value.position == 4
    # Contained: what comes before reads fine, the tail too, and the session takes appends.
    assert fresh.read("s", 0, 4) == recs(4)
    assert fresh.read("s", -4) == recs(4, start=6)
    fresh.append("s", recs(1, start=10))
    assert open_s3(s3_url).read("s", -1) == recs(1, start=10)
    with pytest.raises(CorruptRecord):
        open_s3(s3_url).read("s")


def test_missing_oldest_objects_are_reported_not_skipped(s3_url: str, open_s3: Any) -> None:
    store = open_s3(s3_url)
    for n in range(0, 10, 2):
        store.append("s", recs(2, start=n))
    folder = store.layout.folder("s")
    store.bucket.delete([store.layout.segment_key(folder, 0), store.layout.segment_key(folder, 2)])
    fresh = open_s3(s3_url)
    with pytest.raises(CorruptRecord) as caught:
        fresh.read("s")
    assert caught.value.position == 0
    with pytest.raises(CorruptRecord) as caught:
        fresh.read("s", 1, 3)
    assert caught.value.position == 1
    assert fresh.read("s", -6) == recs(6, start=4)


def test_a_damaged_object_raises_corrupt_record(s3_url: str, open_s3: Any) -> None:
    store = open_s3(s3_url)
    store.append("s", recs(2))
    store.append("s", recs(2, start=2))
    key = store.layout.segment_key(store.layout.folder("s"), 2)
    for body in (b"not a segment", b""):
        store.bucket.put(key, body)
        with pytest.raises(CorruptRecord) as caught:
            open_s3(s3_url).read("s")
        assert caught.value.session_id == "s" and caught.value.position == 2
        assert open_s3(s3_url).read("s", 0, 2) == recs(2)


def test_foreign_objects_are_ignored(s3_url: str, open_s3: Any) -> None:
    store = open_s3(s3_url)
    store.append("s", recs(2))
    base = store.layout.base
    for key in [f"{encode_session('s')}/notes.txt", f"{encode_session('s')}/log/x.seg", "README"]:
        store.bucket.put(base + key, b"hi")
    fresh = open_s3(s3_url)
    assert fresh.read("s") == recs(2)
    assert list(fresh.list_sessions()) == ["s"]


# -- list and delete -----------------------------------------------------------------------


def test_list_sessions_returns_ids_exactly_in_byte_order(s3_url: str, open_s3: Any) -> None:
    store = open_s3(s3_url)
    ids = ["b", "a/b", "A", "a", "é", "\U0001f600", "a b", "x" * 300, "x" * 300 + "é", "../up"]
    for session in ids:
        store.append(session, recs(1))
    listed = list(open_s3(s3_url).list_sessions())
    short = sorted((i for i in ids if len(i.encode()) <= 140), key=str.encode)
    assert [i for i in listed if len(i.encode()) <= 140] == short
    assert sorted(listed) == sorted(ids)
    assert sorted(store.list_sessions("x" * 300)) == ["x" * 300, "x" * 300 + "é"]
    assert list(store.list_sessions("a")) == ["a", "a b", "a/b"]
    assert list(store.list_sessions("\U0001f601")) == []  # shares 3 of 4 UTF-8 bytes
    assert list(store.list_sessions("\U0001f600")) == ["\U0001f600"]
    assert list(store.list_sessions("nothing")) == []


def test_long_ids_read_and_list_back(s3_url: str, open_s3: Any) -> None:
    store = open_s3(s3_url)
    long_a, long_b = "é" * 511 + "a", "é" * 511 + "b"  # share their first 140 bytes
    store.append(long_a, recs(1, "a"))
    store.append(long_b, recs(1, "b"))
    fresh = open_s3(s3_url)
    assert fresh.read(long_a) == recs(1, "a")
    assert fresh.read(long_b) == recs(1, "b")
    assert sorted(fresh.list_sessions("é")) == sorted([long_a, long_b])
    fresh.delete(long_a)
    assert list(fresh.list_sessions("é")) == [long_b]


def test_delete_removes_every_object(s3_url: str, open_s3: Any) -> None:
    store = open_s3(s3_url, rollover_segments=4)
    for n in range(9):
        store.append("s", recs(1, start=n))
    store.compact("s")
    store.append("s", recs(1, start=9))
    store.append("k", recs(1))
    assert any(key.startswith("chunk/") for key, _ in keys_of(store, "s"))
    store.delete("s")
    assert [key for key, _ in keys_of(store)] == [
        f"{encode_session('k')}/log/{10**16 - 1:016d}.seg"
    ]
    assert store.read("s") == []
    store.append("s", recs(1, "again"))
    assert open_s3(s3_url).read("s") == recs(1, "again")


def test_delete_objects_is_batched_by_a_thousand() -> None:
    calls: list[int] = []

    class Client:
        def delete_objects(self, Bucket: str, Delete: dict[str, Any]) -> dict[str, Any]:
            calls.append(len(Delete["Objects"]))
            assert Delete["Quiet"] is True
            return {}

    Bucket(Client(), S3Options(bucket="b")).delete([f"k{n}" for n in range(2500)])
    assert calls == [1000, 1000, 500]


# -- configuration and errors --------------------------------------------------------------


def test_url_options_and_aliases() -> None:
    from chatkeep.s3.config import parse_url

    options = parse_url(
        "s3://bucket/a/b/?endpoint_url=http://h:9000&region_name=eu-west-1&max_workers=3"
        "&read_timeout=2.5&addressing_style=path&profile=dev&namespace=acme/eu",
        retries=7,
    )
    assert (options.bucket, options.prefix, options.endpoint_url) == (
        "bucket",
        "a/b",
        "http://h:9000",
    )
    assert (options.region, options.max_workers, options.read_timeout) == ("eu-west-1", 3, 2.5)
    assert (options.addressing_style, options.profile, options.retries) == ("path", "dev", 7)
    assert options.namespace == "acme/eu"


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("s3://key:secret@bucket/p", "credentials do not belong"),
        ("s3://bucket/p?aws_secret_access_key=secret", "must not appear in the URL"),
        ("s3://bucket/p?aws_session_token=secret", "must not appear in the URL"),
        ("s3://bucket/p?endpoint_url=http://user:secret@host:9000", "must not contain"),
        ("s3://bucket/p?endpoint_url=http://host/?sig=secret", "query"),
        ("s3://bucket/p?colour=blue", "unknown S3 URL option"),
        ("s3://bucket/p?max_workers=many", "must be a number"),
        ("s3://bucket/p?max_workers=0", "at least 1"),
        ("s3://bucket/p?legacy_check=maybe", "true or false"),
        ("s3://bucket/p?rollover_segments=1", "rollover_segments"),
        ("s3://bucket/p?addressing_style=sideways", "addressing_style"),
        ("s3://bucket/p?namespace=a//b", "namespace"),
        ("s3://bucket/p?namespace=..", "namespace"),
        ("s3:///p", "needs a bucket"),
        ("s3://bu%2Fcket/p", "needs a bucket"),
        (f"s3://bucket/{'p' * 481}", "prefix"),
        (f"s3://bucket/a/{MARKER}/b", "must not have a component"),
    ],
)
def test_bad_urls_are_refused_without_echoing_secrets(url: str, message: str) -> None:
    from chatkeep.s3.config import parse_url

    with pytest.raises(InvalidOption, match=message) as caught:
        parse_url(url)
    assert "secret" not in str(caught.value).replace("secret_access_key", "")


def test_keyword_options_are_checked_too() -> None:
    from chatkeep.s3.config import parse_url

    for options, message in [
        ({"colour": "blue"}, "colour"),
        ({"max_workers": "8"}, "max_workers must be int"),
        ({"namespace": 7}, "namespace must be str"),
        ({"endpoint_url": "https://me:hunter2@host"}, "must not contain"),
        ({"prefix": "p" * 481}, "prefix"),
    ]:
        with pytest.raises(InvalidOption, match=message) as caught:
            parse_url("s3://bucket", **options)
        assert "hunter2" not in str(caught.value)


def test_percent_escapes_are_decoded_once_in_urls_and_never_in_keywords() -> None:
    from chatkeep.s3.config import parse_url

    assert parse_url("s3://bucket/a%2Fb").prefix == "a/b"
    assert parse_url("s3://bucket/a%252Fb").prefix == "a%2Fb"
    assert parse_url("s3://bucket/x", prefix="a%2Fb").prefix == "a%2Fb"  # the keyword wins
    assert parse_url("s3://bucket/x?namespace=t%3A1").namespace == "t:1"
    assert parse_url("s3://bucket/x?namespace=a", namespace="b").namespace == "b"


def test_partial_credentials_are_a_clear_error() -> None:
    from chatkeep.s3.store import S3Store

    with pytest.raises(InvalidOption, match="could not create the S3 client") as caught:
        S3Store("bucket", aws_secret_access_key="half-a-secret")
    assert "half-a-secret" not in str(caught.value)


def test_missing_bucket_is_reported_with_a_hint_and_no_secret(s3_endpoint: Any) -> None:
    url = s3_endpoint.url().replace(s3_endpoint.bucket, "no-such-bucket-here", 1)
    store = open_store(url, aws_access_key_id="AKIDLEAK", aws_secret_access_key="s3cr3t-leak")
    try:
        with pytest.raises(StoreUnavailable) as caught:
            store.append("s", recs(1))
        text = str(caught.value) + repr(store) + repr(store.backend)
        assert "NoSuchBucket" in str(caught.value) and "create the bucket" in str(caught.value)
        assert "s3cr3t-leak" not in text and "AKIDLEAK" not in text
        assert caught.value.__cause__ is None and caught.value.__suppress_context__
    finally:
        store.close()


def test_a_closed_store_refuses_work(s3_url: str, open_s3: Any) -> None:
    store = open_s3(s3_url)
    store.append("s", recs(1))
    store.close()
    store.close()
    with pytest.raises(StoreClosed):
        store.read("s")
    with pytest.raises(StoreClosed):
        store.append("s", recs(1))
