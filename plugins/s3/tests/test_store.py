"""The S3 store against a real S3 endpoint over HTTP: behaviour, layout and request costs."""

from __future__ import annotations

from typing import Any

import pytest

from chatkeep.core import CorruptRecord, Record, StoreUnavailable, open_store
from chatkeep.s3.bucket import Bucket
from chatkeep.s3.config import S3Options
from chatkeep.s3.keys import encode_session


def recs(count: int, tag: str = "r", start: int = 0, size: int = 0) -> list[Record]:
    pad = b"." * size
    return [Record(f"{tag}-{n}", f"{tag}:{n}".encode() + pad) for n in range(start, start + count)]


def keys_of(s3_endpoint: Any, url: str) -> list[tuple[str, int]]:
    prefix = url.split("?", maxsplit=1)[0].split("/", 3)[3] + "/"
    client = s3_endpoint.client()
    listed = client.list_objects_v2(Bucket=s3_endpoint.bucket, Prefix=prefix)
    return [(item["Key"][len(prefix) :], item["Size"]) for item in listed.get("Contents", [])]


# -- the two hooks, through open_store ----------------------------------------------------


def test_open_store_by_url_declares_capabilities_and_hides_options(s3_url: str) -> None:
    secret = {"aws_access_key_id": "chatkeep-test-key", "aws_secret_access_key": "test-secret"}
    with open_store(s3_url, **secret) as store:
        assert store.name == "s3"
        assert store.capabilities >= {"delete", "list_sessions", "close", "shared", "durable"}
        assert "ttl" not in store.capabilities
        store.append("s", recs(2))
        assert store.read("s") == recs(2)
        assert "secret" not in repr(store) and "secret" not in repr(store.backend)


def test_key_layout(s3_endpoint: Any, s3_url: str, open_s3: Any) -> None:
    store = open_s3(s3_url)
    store.append("chat/1", recs(3))
    store.append("chat/1", recs(2, start=3))
    folder = encode_session("chat/1")
    listed = keys_of(s3_endpoint, s3_url)
    assert [key for key, _ in listed] == [
        f"{folder}/seg/0000000000000000",
        f"{folder}/seg/0000000000000003",
    ]
    assert all(size > 0 for _, size in listed)


# -- costs ---------------------------------------------------------------------------------


def test_a_warm_turn_is_one_list_and_one_put(
    s3_url: str, open_s3: Any, count_requests: Any
) -> None:
    store = open_s3(s3_url)
    for n in range(60):
        store.append("s", recs(1, start=n))
    requests = count_requests(store)
    assert store.read("s", -50) == recs(50, start=10)
    assert dict(requests) == {"ListObjectsV2": 1}  # every segment is cached: no GET
    requests.clear()
    store.append("s", recs(2, start=60))
    assert dict(requests) == {"PutObject": 1}


def test_a_cold_tail_read_fetches_only_the_segments_it_returns(
    s3_url: str, open_s3: Any, count_requests: Any
) -> None:
    writer = open_s3(s3_url)
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


def test_a_cold_append_reads_only_the_last_segment(
    s3_url: str, open_s3: Any, count_requests: Any
) -> None:
    writer = open_s3(s3_url)
    for n in range(0, 40, 2):
        writer.append("s", recs(2, start=n))
    other = open_s3(s3_url)
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


def test_unknown_session_costs_one_list(s3_url: str, open_s3: Any, count_requests: Any) -> None:
    store = open_s3(s3_url)
    requests = count_requests(store)
    assert store.read("nobody", -5) == []
    assert dict(requests) == {"ListObjectsV2": 1}


# -- other processes' changes --------------------------------------------------------------


def test_delete_by_another_handle_is_seen_and_ids_can_be_reused(s3_url: str, open_s3: Any) -> None:
    one, two = open_s3(s3_url), open_s3(s3_url)
    one.append("s", recs(3))
    assert one.read("s") == recs(3)
    two.delete("s")
    assert one.read("s") == []
    # `one` remembers having stored these ids; it must notice they are gone.
    one.append("s", recs(3))
    assert two.read("s") == recs(3)
    assert one.read("s", -1) == recs(1, start=2)


def test_expired_oldest_segments_leave_a_shorter_log(
    s3_endpoint: Any, s3_url: str, open_s3: Any
) -> None:
    store = open_s3(s3_url)
    for n in range(0, 10, 2):
        store.append("s", recs(2, start=n))
    client = s3_endpoint.client()
    prefix = s3_url.split("?", maxsplit=1)[0].split("/", 3)[3]
    folder = f"{prefix}/{encode_session('s')}/seg/"
    for position in (0, 2):  # what a lifecycle expiration rule would do
        client.delete_object(Bucket=s3_endpoint.bucket, Key=f"{folder}{position:016d}")
    fresh = open_s3(s3_url)
    assert fresh.read("s") == recs(6, start=4)
    assert fresh.read("s", -2) == recs(2, start=8)
    assert fresh.read("s", 0, 1) == recs(1, start=4)
    fresh.append("s", recs(1, start=10))
    assert open_s3(s3_url).read("s") == recs(7, start=4)
    # A warm handle keeps serving what it cached (expiry is not erasure) and sees new ends.
    assert store.read("s", -1) == recs(1, start=10)


def test_a_missing_middle_segment_is_skipped(s3_endpoint: Any, s3_url: str, open_s3: Any) -> None:
    store = open_s3(s3_url)
    for n in range(0, 10, 2):
        store.append("s", recs(2, start=n))
    prefix = s3_url.split("?", maxsplit=1)[0].split("/", 3)[3]
    key = f"{prefix}/{encode_session('s')}/seg/{4:016d}"
    s3_endpoint.client().delete_object(Bucket=s3_endpoint.bucket, Key=key)
    # A raced delete and a stale writer leave a segment whose predecessor is gone.
    fresh = open_s3(s3_url)
    expected = recs(4) + recs(4, start=6)
    assert fresh.read("s") == expected
    assert fresh.read("s", 3, 6) == expected[3:6]
    assert fresh.read("s", -5) == expected[-5:]


def test_a_damaged_object_raises_corrupt_record(
    s3_endpoint: Any, s3_url: str, open_s3: Any
) -> None:
    store = open_s3(s3_url)
    store.append("s", recs(2))
    prefix = s3_url.split("?", maxsplit=1)[0].split("/", 3)[3]
    key = f"{prefix}/{encode_session('s')}/seg/{0:016d}"
    s3_endpoint.client().put_object(Bucket=s3_endpoint.bucket, Key=key, Body=b"not a segment")
    with pytest.raises(CorruptRecord) as caught:
        open_s3(s3_url).read("s")
    assert caught.value.session_id == "s" and caught.value.position == 0


def test_foreign_objects_are_ignored(s3_endpoint: Any, s3_url: str, open_s3: Any) -> None:
    store = open_s3(s3_url)
    store.append("s", recs(2))
    prefix = s3_url.split("?", maxsplit=1)[0].split("/", 3)[3]
    client = s3_endpoint.client()
    for key in [f"{encode_session('s')}/notes.txt", "README", "zzzz-not-base32/x", "x/y"]:
        client.put_object(Bucket=s3_endpoint.bucket, Key=f"{prefix}/{key}", Body=b"hi")
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
    short = sorted((i for i in ids if len(i.encode()) <= 250), key=str.encode)
    assert [i for i in listed if len(i.encode()) <= 250] == short
    assert sorted(listed) == sorted(ids)
    assert sorted(store.list_sessions("x" * 300)) == ["x" * 300, "x" * 300 + "é"]
    assert list(store.list_sessions("a")) == ["a", "a b", "a/b"]
    assert list(store.list_sessions("\U0001f601")) == []  # shares 3 of 4 UTF-8 bytes
    assert list(store.list_sessions("\U0001f600")) == ["\U0001f600"]
    assert list(store.list_sessions("nothing")) == []


def test_long_ids_read_and_list_back(s3_url: str, open_s3: Any) -> None:
    store = open_s3(s3_url)
    long_a, long_b = "é" * 511 + "a", "é" * 511 + "b"  # share their first 250 bytes
    store.append(long_a, recs(1, "a"))
    store.append(long_b, recs(1, "b"))
    fresh = open_s3(s3_url)
    assert fresh.read(long_a) == recs(1, "a")
    assert fresh.read(long_b) == recs(1, "b")
    assert sorted(fresh.list_sessions("é")) == sorted([long_a, long_b])
    fresh.delete(long_a)
    assert list(fresh.list_sessions("é")) == [long_b]


def test_delete_removes_every_object(s3_endpoint: Any, s3_url: str, open_s3: Any) -> None:
    store = open_s3(s3_url)
    for n in range(5):
        store.append("s", recs(1, start=n))
    store.compact("s")
    store.append("s", recs(1, start=5))
    store.append("k", recs(1))
    store.delete("s")
    assert [key for key, _ in keys_of(s3_endpoint, s3_url)] == [
        f"{encode_session('k')}/seg/{0:016d}"
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
        "&read_timeout=2.5&addressing_style=path&profile=dev",
        retries=7,
    )
    assert (options.bucket, options.prefix, options.endpoint_url) == (
        "bucket",
        "a/b",
        "http://h:9000",
    )
    assert (options.region, options.max_workers, options.read_timeout) == ("eu-west-1", 3, 2.5)
    assert (options.addressing_style, options.profile, options.retries) == ("path", "dev", 7)


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("s3://key:secret@bucket/p", "credentials do not belong"),
        ("s3://bucket/p?aws_secret_access_key=secret", "must not appear in the URL"),
        ("s3://bucket/p?colour=blue", "unknown S3 URL option"),
        ("s3://bucket/p?max_workers=many", "must be a number"),
        ("s3://bucket/p?max_workers=0", "at least 1"),
        ("s3://bucket/p?addressing_style=sideways", "addressing_style"),
        ("s3:///p", "needs a bucket"),
    ],
)
def test_bad_urls_are_refused_without_echoing_secrets(url: str, message: str) -> None:
    from chatkeep.s3.config import parse_url

    with pytest.raises(ValueError, match=message) as caught:
        parse_url(url)
    assert "secret" not in str(caught.value).replace("secret_access_key", "")


def test_partial_credentials_are_a_clear_error() -> None:
    from chatkeep.s3.store import S3Store

    with pytest.raises(ValueError, match="could not create the S3 client") as caught:
        S3Store("bucket", aws_secret_access_key="half-a-secret")
    assert "half-a-secret" not in str(caught.value)


def test_unknown_keyword_option_is_a_type_error() -> None:
    from chatkeep.s3.config import parse_url

    with pytest.raises(TypeError, match="colour"):
        parse_url("s3://bucket", colour="blue")


def test_missing_bucket_is_reported_with_a_hint_and_no_secret(s3_endpoint: Any) -> None:
    url = s3_endpoint.url().replace(s3_endpoint.bucket, "no-such-bucket-here", 1)
    store = open_store(url, aws_access_key_id="AKIDLEAK", aws_secret_access_key="s3cr3t-leak")
    try:
        with pytest.raises(StoreUnavailable) as caught:
            store.append("s", recs(1))
        text = str(caught.value) + repr(store) + repr(store.backend)
        assert "NoSuchBucket" in str(caught.value) and "create the bucket" in str(caught.value)
        assert "s3cr3t-leak" not in text and "AKIDLEAK" not in text
    finally:
        store.close()


def test_a_closed_store_refuses_work(s3_url: str, open_s3: Any) -> None:
    store = open_s3(s3_url)
    store.append("s", recs(1))
    store.close()
    store.close()
    with pytest.raises(StoreUnavailable, match="closed"):
        store.read("s")
    with pytest.raises(StoreUnavailable, match="closed"):
        store.append("s", recs(1))
