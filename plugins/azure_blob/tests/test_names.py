"""Session ids as blob folder names: safe, distinct, decodable, prefix-preserving."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chatkeep.azure_blob.layout import (
    MAX_PLAIN,
    decode_folder,
    encode_prefix,
    encode_session_id,
    is_hashed,
    normalize_root,
    segment_name,
    segment_number,
)
from chatkeep.testing import example_count

# Valid session ids: 1-512 characters, no NUL, no lone surrogates.
session_ids = st.text(
    st.characters(exclude_categories=["Cs"], exclude_characters="\x00"),
    min_size=1,
    max_size=512,
)

HOSTILE = [
    "..",
    ".",
    "../../etc/passwd",
    "a/b",
    "a\\b",
    "~",
    "~2f",
    "%2F",
    "a b",
    "\u00e9",
    "e\u0301",  # the same text as "é" after normalisation, but a different id
    "\U0001f600",
    "x" * 512,
    "\U0001f600" * 512,
    "?comp=list",
    "#frag",
    "trailing.",
    "trailing/",
    "\n\t\r",
    "\ufeff",
    "\uffff",
]


@pytest.mark.parametrize("session_id", HOSTILE)
def test_hostile_ids_become_safe_names(session_id: str) -> None:
    folder = encode_session_id(session_id)
    assert "/" not in folder and "." not in folder and "\\" not in folder
    assert all(c.isascii() and (c.isalnum() or c in "_-~") for c in folder)
    assert len(folder) <= MAX_PLAIN + 66
    if is_hashed(folder):
        assert decode_folder(folder) is None  # its id is read from the segment metadata
    else:
        assert decode_folder(folder) == session_id


def test_distinct_hostile_ids_never_collide() -> None:
    folders = [encode_session_id(session_id) for session_id in HOSTILE]
    assert len(set(folders)) == len(HOSTILE)


@settings(max_examples=example_count(400))
@given(session_ids)
def test_round_trip(session_id: str) -> None:
    folder = encode_session_id(session_id)
    assert folder == encode_session_id(session_id)
    if not is_hashed(folder):
        assert decode_folder(folder) == session_id


@settings(max_examples=example_count(300))
@given(session_ids, session_ids)
def test_distinct_ids_get_distinct_folders(one: str, two: str) -> None:
    if one != two:
        assert encode_session_id(one) != encode_session_id(two)


@settings(max_examples=example_count(400))
@given(session_ids, st.integers(0, 512))
def test_prefixes_are_preserved(session_id: str, cut: int) -> None:
    prefix = session_id[:cut]
    assert encode_session_id(session_id).startswith(encode_prefix(prefix))


@pytest.mark.parametrize("name", ["", "~", "~zz", "~c3", "a.b", "A~2", "~41", "x~~" + "0" * 64])
def test_foreign_names_do_not_decode(name: str) -> None:
    # "~41" would be "A", which is spelled plainly: only canonical names decode.
    assert decode_folder(name) is None


def test_long_ids_are_hashed_but_keep_a_listable_prefix() -> None:
    long_id = "user-42/" + "\u4e2d" * 300
    folder = encode_session_id(long_id)
    assert is_hashed(folder)
    assert folder.startswith(encode_prefix("user-42/"))
    assert len(folder) <= 480
    other = long_id[:-1] + "\u4e8c"
    assert encode_session_id(other) != folder


def test_roots_and_segment_names() -> None:
    assert normalize_root("") == ""
    assert normalize_root("/a/b/") == "a/b/"
    with pytest.raises(ValueError, match="segments"):
        normalize_root("a/../b")
    name = segment_name("root/s", 12)
    assert name == "root/s/0000000012"
    assert segment_number(name) == 12
    assert segment_number("root/s/x/abc") is None
