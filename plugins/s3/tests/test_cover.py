"""Choosing objects for a read: each position once, from the fewest objects."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from chatkeep.s3.cover import (
    Entry,
    Span,
    cover,
    overlapping,
    pieces,
    speculative_window,
    window,
    with_end,
)


def seg(start: int, size: int = 10, end: int | None = None) -> Entry:
    return Entry(f"seg/{start}", f"e{start}", size, start, end)


def chunk(start: int, end: int) -> Entry:
    return Entry(f"cmp/{start}-{end}", "c", 100, start, end, chunk=True)


def positions(spans: list[Span]) -> list[tuple[str, int]]:
    out: list[tuple[str, int]] = []
    for span in spans:
        assert span.hi is not None
        out.extend((span.piece.key, p) for p in range(span.lo, span.hi))
    return out


def test_segments_alone_cover_the_log_and_the_last_end_is_open() -> None:
    spans = cover(pieces([seg(0), seg(2), seg(5)], []))
    assert spans is not None
    assert [(s.piece.key, s.lo, s.hi) for s in spans] == [
        ("seg/0", 0, 2),
        ("seg/2", 2, 5),
        ("seg/5", 5, None),
    ]


def test_a_chunk_wins_over_the_segments_it_consolidated() -> None:
    # A crash between writing the chunk and guarding the segments left both.
    found = pieces([seg(0), seg(2), seg(5, end=7)], [chunk(0, 5)])
    spans = cover(found)
    assert spans is not None
    assert [(s.piece.key, s.lo, s.hi) for s in spans] == [("cmp/0-5", 0, 5), ("seg/5", 5, 7)]


def test_guards_hold_nothing_but_still_end_the_segment_before() -> None:
    found = pieces([seg(0), seg(2, size=0), seg(4, size=0), seg(6)], [chunk(2, 6)])
    spans = cover(found)
    assert spans is not None
    assert [(s.piece.key, s.lo, s.hi) for s in spans] == [
        ("seg/0", 0, 2),
        ("cmp/2-6", 2, 6),
        ("seg/6", 6, None),
    ]


def test_overlapping_chunks_yield_each_position_once() -> None:
    found = pieces(
        [seg(n, size=0) for n in range(0, 12, 2)] + [seg(12, end=13)],
        [chunk(0, 6), chunk(2, 10), chunk(4, 12)],
    )
    spans = cover(found)
    assert spans is not None
    assert [p for _, p in positions(spans)] == list(range(13))


def test_a_gap_is_reported_or_skipped() -> None:
    found = pieces([seg(0, end=2), seg(5, end=6)], [])
    assert cover(found) is None
    spans = cover(found, skip_gaps=True)
    assert spans is not None
    assert [p for _, p in positions(spans)] == [0, 1, 5]


def test_a_log_whose_oldest_objects_expired_starts_later() -> None:
    spans = cover(pieces([seg(40), seg(42, end=43)], []))
    assert spans is not None and spans[0].lo == 40
    assert window(spans, -1, None) == (42, 43)
    assert window(spans, 0, 1) == (40, 41)


@given(
    st.lists(st.integers(min_value=1, max_value=5), min_size=1, max_size=12),
    st.integers(min_value=-30, max_value=30),
    st.one_of(st.none(), st.integers(min_value=-30, max_value=30)),
)
def test_speculative_reads_are_a_superset_of_what_the_slice_needs(
    counts: list[int], start: int, stop: int | None
) -> None:
    starts = [sum(counts[:n]) for n in range(len(counts))]
    spans = cover(pieces([seg(s) for s in starts], []))
    assert spans is not None and spans[-1].hi is None
    lo, hi = speculative_window(spans, start, stop)
    guessed = set(overlapping(spans, lo, hi))
    shortest = spans[-1].lo + 1
    if not (start >= 0 and stop is not None and 0 <= stop <= shortest):
        guessed.add(len(spans) - 1)  # the store always reads the last one then
    exact = with_end(spans, sum(counts))
    w_lo, w_hi = window(exact, start, stop)
    needed = set(overlapping(exact, w_lo, w_hi)) if w_lo < w_hi else set()
    assert needed <= guessed
    log = list(range(sum(counts)))
    assert list(range(w_lo, w_hi)) == log[start:stop]
