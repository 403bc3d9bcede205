"""Keys: safe, distinct, case-proof and reversible names; newest first; tenants disjoint."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chatkeep.core import InvalidOption
from chatkeep.s3.layout import (
    MARKER,
    MAX_PREFIX_BYTES,
    PLAIN_LIMIT,
    Layout,
    ParsedKey,
    decode_session,
    encode_namespace,
    encode_prefix,
    encode_session,
    hashed_matches,
    is_hashed,
)

# Valid session ids: no NUL, UTF-8 encodable (no lone surrogates), 1..512 characters.
session_ids = st.text(
    st.characters(blacklist_categories=["Cs"], blacklist_characters="\x00"),
    min_size=1,
    max_size=512,
)
short_ids = st.text(
    st.characters(blacklist_categories=["Cs"], blacklist_characters="\x00"),
    min_size=1,
    max_size=60,
)
namespaces = st.from_regex(r"[A-Za-z0-9._:-]{1,20}(/[A-Za-z0-9._:-]{1,20}){0,3}", fullmatch=True)


@given(session_ids)
def test_plain_ids_round_trip_and_long_ids_are_hashed(session_id: str) -> None:
    encoded = encode_session(session_id)
    assert re.fullmatch(r"[0-9a-v]+(~[0-9a-v]+)?", encoded), encoded
    if len(session_id.encode()) <= PLAIN_LIMIT:
        assert not is_hashed(encoded)
        assert decode_session(encoded) == session_id
        # Stores that fold keys to upper case in listings still decode.
        assert decode_session(encoded.upper()) == session_id
    else:
        assert is_hashed(encoded)
        assert decode_session(encoded) is None
        assert hashed_matches(encoded, session_id)
        assert not hashed_matches(encoded, session_id + "x")


@given(session_ids, session_ids)
def test_distinct_ids_never_share_a_key(one: str, two: str) -> None:
    if one != two:
        assert encode_session(one).lower() != encode_session(two).lower()


@given(short_ids, short_ids)
def test_keys_sort_like_the_ids_utf8_bytes(one: str, two: str) -> None:
    assert (encode_session(one) < encode_session(two)) == (one.encode() < two.encode())


@given(session_ids, st.integers(min_value=0, max_value=600))
def test_prefix_of_an_id_gives_a_prefix_of_its_key(session_id: str, cut: int) -> None:
    prefix = session_id[:cut]
    assert encode_session(session_id).startswith(encode_prefix(prefix))


def test_hostile_ids_stay_inside_their_folder() -> None:
    layout = Layout.create("chats", None)
    for hostile in ["../x", "/abs", "a/../../b", ".", "..", "x\\y", "%2e%2e", "A", "a"]:
        folder = layout.folder(hostile)
        assert folder.startswith(f"chats/{MARKER}/_/")
        assert folder.count("/") == 4
        assert ".." not in folder
    assert layout.folder("A") != layout.folder("a")


@given(namespaces, namespaces)
def test_namespaces_are_one_component_each_and_never_share_one(one: str, two: str) -> None:
    first, second = encode_namespace(one), encode_namespace(two)
    assert "/" not in first and first != "_"
    if one != two:
        # Disjoint folders: neither is a prefix of the other, nested or not.
        assert not (first + "/").startswith(second + "/")
        assert first.lower() != second.lower()


def test_nested_prefixes_and_namespaces_have_disjoint_key_spaces() -> None:
    bases = [
        Layout.create("acme", None).base,
        Layout.create("acme/eu", None).base,
        Layout.create("acmecorp", None).base,
        Layout.create("acme", "eu").base,
        Layout.create("acme", "acme/eu").base,
        Layout.create("acme", "acme").base,
        Layout.create("", None).base,
    ]
    for one in bases:
        for two in bases:
            if one != two:
                assert not one.startswith(two), (one, two)


def test_a_prefix_through_another_stores_marker_is_refused() -> None:
    for prefix in [MARKER, f"acme/{MARKER}", f"acme/{MARKER}/_", f"{MARKER}/x/y"]:
        with pytest.raises(InvalidOption, match="must not have a component"):
            Layout.create(prefix, None)
    assert Layout.create(f"acme/{MARKER}x", None).base == f"acme/{MARKER}x/{MARKER}/_/"


def test_every_key_fits_s3s_limit() -> None:
    layout = Layout.create("p" * MAX_PREFIX_BYTES, "n" * 128)
    folder = layout.folder("\U0001f600" * 512)
    longest = Layout.chunk_key(folder, 10**15, 10**16 - 1)
    assert len(longest.encode()) <= 1024
    assert MAX_PREFIX_BYTES >= 480


def test_prefix_is_normalised_and_bounded() -> None:
    assert Layout.create("", None).root == ""
    assert Layout.create("/a/b/", None).root == "a/b/"
    for bad in ["p" * (MAX_PREFIX_BYTES + 1), "é" * (MAX_PREFIX_BYTES // 2 + 1), "a\x00b"]:
        with pytest.raises(InvalidOption, match="prefix"):
            Layout.create(bad, None)
    with pytest.raises(InvalidOption, match="Unicode"):
        Layout.create("a\udc80", None)


def test_the_newest_segment_lists_first_and_before_a_table_ending_there() -> None:
    folder = "root/abc/"
    keys = [Layout.segment_key(folder, n) for n in (0, 1, 9, 10, 11, 12345)]
    keys += [Layout.contents_key(folder, n) for n in (10, 12345)]
    ordered = sorted(keys)
    assert ordered[:3] == [
        Layout.segment_key(folder, 12345),
        Layout.contents_key(folder, 12345),
        Layout.segment_key(folder, 11),
    ]
    assert ordered.index(Layout.segment_key(folder, 10)) + 1 == ordered.index(
        Layout.contents_key(folder, 10)
    )
    # `below(p)` lists from the segment starting at p downwards.
    after = Layout.below(folder, 10)
    assert next(key for key in ordered if key > after) == Layout.segment_key(folder, 10)
    assert Layout.segment_key(folder, 11) < after


def test_keys_parse_back_and_foreign_keys_do_not() -> None:
    folder = "root/abc/"
    assert Layout.parse(folder, Layout.segment_key(folder, 42)) == ParsedKey("seg", start=42)
    assert Layout.parse(folder, Layout.contents_key(folder, 42)) == ParsedKey("toc", end=42)
    assert Layout.parse(folder, Layout.chunk_key(folder, 3, 9)) == ParsedKey("chunk", 3, 9)
    assert Layout.parse(folder, Layout.id_key(folder)) == ParsedKey("id")
    upper = Layout.segment_key(folder, 42)[len(folder) :].upper()
    assert Layout.parse(folder, folder + upper) == ParsedKey("seg", start=42)
    for foreign in [
        "log/42.seg",
        "log/+999999999999957.seg",
        "log/9999_99999999957.seg",
        "log/999999999999995\u0662.seg",
        "log/9999999999999957.bak",
        "chunk/0000000000000009-0000000000000003",
        "chunk/0000000000000003_0000000000000009",
        "seg/0000000000000042",
        "notes.txt",
        "log/9999999999999957.seg/x",
    ]:
        assert Layout.parse(folder, folder + foreign) is None, foreign


def test_non_canonical_encodings_are_not_ours() -> None:
    assert decode_session("") is None
    assert decode_session("x") is None  # outside the alphabet
    assert decode_session("c5h") is None  # an impossible length
    assert decode_session("c5h1") is None  # stray low bits: not what we write
    assert decode_session(encode_session("ab")) == "ab"
