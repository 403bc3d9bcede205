"""Session ids become key parts that are safe, distinct, case-proof and reversible."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chatkeep.s3.keys import (
    MAX_PREFIX_BYTES,
    PLAIN_LIMIT,
    Layout,
    ParsedKey,
    decode_session,
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
    layout = Layout.for_prefix("chats")
    for hostile in ["../x", "/abs", "a/../../b", ".", "..", "x\\y", "%2e%2e", "A", "a"]:
        folder = layout.session_dir(hostile)
        assert folder.startswith("chats/")
        assert folder.count("/") == 2
        assert ".." not in folder
    assert layout.session_dir("A") != layout.session_dir("a")


def test_every_key_fits_s3s_limit() -> None:
    layout = Layout.for_prefix("p" * MAX_PREFIX_BYTES)
    folder = layout.session_dir("\U0001f600" * 512)
    longest = Layout.chunk_key(folder, 10**15, 10**16 - 1)
    assert len(longest.encode()) <= 1024


def test_prefix_is_normalised_and_bounded() -> None:
    assert Layout.for_prefix("").root == ""
    assert Layout.for_prefix("/a/b/").root == "a/b/"
    with pytest.raises(ValueError, match="prefix"):
        Layout.for_prefix("p" * (MAX_PREFIX_BYTES + 1))


def test_keys_parse_back_and_foreign_keys_do_not() -> None:
    folder = "root/abc/"
    assert Layout.parse(folder, Layout.segment_key(folder, 42)) == ParsedKey("seg", 42)
    assert Layout.parse(folder, Layout.chunk_key(folder, 3, 9)) == ParsedKey("cmp", 3, 9)
    assert Layout.parse(folder, Layout.id_key(folder)) == ParsedKey("id")
    assert Layout.parse(folder, folder + "SEG/0000000000000042") == ParsedKey("seg", 42)
    for foreign in [
        "seg/42",
        "seg/+000000000000042",
        "seg/0000_00000000042",
        "seg/ 000000000000042",
        "seg/000000000000004\u0662",
        "cmp/0000000000000009-0000000000000003",
        "cmp/0000000000000003_0000000000000009",
        "notes.txt",
        "seg/0000000000000042/x",
    ]:
        assert Layout.parse(folder, folder + foreign) is None, foreign


def test_non_canonical_encodings_are_not_ours() -> None:
    assert decode_session("") is None
    assert decode_session("x") is None  # outside the alphabet
    assert decode_session("c5h") is None  # an impossible length
    assert decode_session("c5h1") is None  # stray low bits: not what we write
    assert decode_session(encode_session("ab")) == "ab"
