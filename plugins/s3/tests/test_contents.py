"""Tables of contents: binary-counter merging within limits, a lossless format, and Bloom
filters that never miss an id."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chatkeep.s3.contents import Contents, ContentsError, Piece, Policy, Span, plan
from chatkeep.s3.recordids import Bloom, id_hashes


def segments(start: int, count: int, size: int = 100) -> list[Span]:
    return [Span(n, n + 1, size, f"log/{n}") for n in range(start, start + count)]


def test_merging_is_a_binary_counter() -> None:
    policy = Policy(rollover=4, max_records=1000, max_bytes=10**9)
    pieces = plan([], segments(0, 4), policy)
    assert [(p.start, p.end) for p in pieces] == [(0, 4)]
    assert [leaf.key for leaf in pieces[0].leaves()] == [f"log/{n}" for n in range(4)]
    history = []
    for round_ in range(1, 8):
        kept = [Span(p.start, p.end, p.size, f"chunk/{p.start}") for p in pieces]
        pieces = plan(kept, segments(4 * round_, 4), policy)
        history.append([p.count for p in pieces])
    assert history == [[8], [8, 4], [16], [16, 4], [16, 8], [16, 8, 4], [32]]


def test_limits_stop_merging_and_keep_big_segments_where_they_are() -> None:
    policy = Policy(rollover=4, max_records=8, max_bytes=10**9)
    pieces: list[Span] = []
    for round_ in range(6):
        kept = [Span(p.start, p.end, p.size, f"chunk/{p.start}") for p in pieces]
        pieces = plan(kept, segments(4 * round_, 4), policy)
    assert [p.count for p in pieces] == [8, 8, 8]
    big = plan([], [*segments(0, 2), Span(2, 3, 10**6, "log/2")], Policy(4, 100, 1000))
    assert [(p.start, p.end, p.key) for p in big] == [(0, 2, None), (2, 3, "log/2")]


def test_the_format_round_trips() -> None:
    table = Contents(
        5,
        Policy(8, 100, 1000),
        (
            Piece(0, 4, 123, "chunk/a", Bloom.of(["a", "b", "c", "d"]), "etag1"),
            Piece(4, 5, 45, "log/b.seg", Bloom.of(["e"]), "etag2"),
        ),
        "e",
    )
    assert Contents.decode(table.encode()) == table


@pytest.mark.parametrize(
    "body",
    [
        b"not json",
        b"{}",
        b'{"format": "other"}',
        Contents(3, Policy(), (Piece(1, 3, 1, "k", Bloom.of(["x"])),), "x").encode(),
        Contents(3, Policy(), (Piece(0, 2, 1, "k", Bloom.of(["x"])),), "x").encode(),
        Contents(3, Policy(), (Piece(0, 3, 1, "k", Bloom.of(["x"])),), None).encode(),
    ],
)
def test_anything_else_is_refused(body: bytes) -> None:
    with pytest.raises(ContentsError):
        Contents.decode(body)


@given(st.sets(st.text(min_size=1, max_size=30), min_size=1, max_size=300))
def test_a_bloom_filter_never_misses_an_id(ids: set[str]) -> None:
    bloom = Bloom.of(ids)
    assert all(bloom.might_hold(id_hashes(record_id)) for record_id in ids)


def test_a_bloom_filter_rarely_answers_perhaps_for_others() -> None:
    bloom = Bloom.of(f"member-{n}" for n in range(2000))
    false = sum(bloom.might_hold(id_hashes(f"other-{n}")) for n in range(20_000))
    assert false < 20_000 * 0.03  # about 1% by design
    assert not Bloom(b"").might_hold(id_hashes("x"))
