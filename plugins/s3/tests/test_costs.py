"""Request counts that must not grow with a session's length, from a cold handle too.

Counted client side (botocore's ``before-call`` events), with a roll-over every 4 appends so
that a few hundred appends cross a hundred roll-overs and several merges of chunks. The
measurements at 1,000 and 10,000 appends with the default settings are in the README
(``tests/measure_requests.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from chatkeep.core import Record

SIZES = [3, 4, 5, 17, 64, 257]
ROLLOVER = 4


def _grow(store: Any, session: str, have: int, want: int) -> None:
    for n in range(have, want):
        store.append(session, [Record(f"r{n:05d}", b"x" * 40)])


def _costs(open_s3: Callable[..., Any], count_requests: Any, url: str) -> list[dict[str, int]]:
    writer = open_s3(url, rollover_segments=ROLLOVER)
    results = []
    have = 0
    for size in SIZES:
        _grow(writer, "s", have, size)
        have = size
        row: dict[str, int] = {}
        for name, step in [
            ("read(-3)", lambda s: s.read("s", -3)),
            ("read(-10)", lambda s: s.read("s", -10)),
            ("append", lambda s, size=size: s.append("s", [Record(f"new{size}", b"y")])),
            ("retry", lambda s: s.append("s", [Record("r00001", b"x" * 40)])),
            ("full", lambda s: s.read("s")),
        ]:
            cold = open_s3(url, rollover_segments=ROLLOVER)
            requests = count_requests(cold)
            step(cold)
            row[name] = sum(n for op, n in requests.items() if op != "ranged")
        have += 1  # the append above
        results.append(row)
    return results


def test_cold_costs_stay_flat_as_the_session_grows(
    s3_url: str, open_s3: Any, count_requests: Any
) -> None:
    rows = _costs(open_s3, count_requests, s3_url)
    first_rolled, last = rows[2], rows[-1]
    for name in ("read(-3)", "read(-10)", "append", "retry"):
        # The same at 258 appends (64 roll-overs) as just after the first roll-over.
        assert last[name] <= first_rolled[name] + 2, (name, rows)
    # A tail read: one LIST, the GETs of what it returns (and a table of contents and a
    # chunk or two once it reaches below the newest roll-over).
    assert all(row["read(-3)"] <= 4 for row in rows), rows
    assert all(row["read(-10)"] <= 1 + 3 + 2 * 3 for row in rows), rows
    # A first append: LIST, GET of the newest segment, GET of the table of contents, PUT
    # (and a roll-over's LIST and three PUTs when it crosses the mark).
    assert all(row["append"] <= 4 + 4 for row in rows), rows
    # A retry of an old record: no PUT; LIST, the newest segment and table of contents,
    # then the chunk's header and the record's bytes.
    assert all(row["retry"] <= 5 for row in rows), rows
    # A full read: LIST, the table of contents, one GET per piece (O(log n)) and per
    # segment after it.
    assert last["full"] <= 2 + 9 + ROLLOVER, rows
