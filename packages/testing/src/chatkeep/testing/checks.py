"""Building blocks shared by the concurrency tests and their worker processes.

A *plan* is the batches each writer appends; :func:`assert_batches_intact` then checks a log
against it: every record exactly once, each writer's records in its own order, and each
batch contiguous (nothing interleaved inside a batch).
"""

from __future__ import annotations

import uuid
from collections import Counter
from urllib.parse import parse_qsl, urlencode

from chatkeep.core import Record

__all__ = [
    "assert_batches_intact",
    "new_session_id",
    "plan_batches",
    "records",
    "with_query",
]


def with_query(url: str, **params: str) -> str:
    """``url`` with query parameters ``params`` set (replacing any of the same name)."""
    head, _, rest = url.partition("?")
    query, hash_mark, fragment = rest.partition("#")
    kept = [(k, v) for k, v in parse_qsl(query, keep_blank_values=True) if k not in params]
    merged = urlencode([*kept, *params.items()])
    return f"{head}?{merged}{hash_mark}{fragment}"


def new_session_id(tag: str = "s") -> str:
    """A fresh random session id, so tests can share one store without cleaning up."""
    return f"ck-{tag}-{uuid.uuid4().hex}"


def records(count: int, tag: str = "r", start: int = 0) -> list[Record]:
    """``count`` small records with ids ``{tag}-{n}`` and data identifying them."""
    return [Record(f"{tag}-{n}", f"{tag}:{n}".encode()) for n in range(start, start + count)]


def plan_batches(writer: str, batches: int, per_batch: int) -> list[list[Record]]:
    """The batches one writer appends: ids ``{writer}.{batch}.{n}``."""
    return [
        [
            Record(f"{writer}.{batch:04d}.{n}", f"{writer}/{batch}/{n}".encode())
            for n in range(per_batch)
        ]
        for batch in range(batches)
    ]


def assert_batches_intact(log: list[Record], plans: dict[str, list[list[Record]]]) -> None:
    """Assert ``log`` holds exactly the planned records, each writer's in order, and each
    batch as one contiguous run."""
    expected = [record for plan in plans.values() for batch in plan for record in batch]
    counts = Counter(record.id for record in log)
    duplicated = sorted(rid for rid, count in counts.items() if count > 1)
    assert not duplicated, f"{len(duplicated)} records stored twice, e.g. {duplicated[:3]}"
    missing = sorted({record.id for record in expected} - set(counts))
    assert not missing, f"{len(missing)} of {len(expected)} records lost, e.g. {missing[:3]}"
    unexpected = sorted(set(counts) - {record.id for record in expected})
    assert not unexpected, f"records nobody appended: {unexpected[:3]}"
    assert sorted(log) == sorted(expected), "some record's data changed on the way"
    position = {record.id: index for index, record in enumerate(log)}
    for writer, plan in plans.items():
        order = [position[record.id] for batch in plan for record in batch]
        assert order == sorted(order), f"writer {writer}'s records are out of order"
        for batch in plan:
            places = [position[record.id] for record in batch]
            assert places == list(range(places[0], places[0] + len(batch))), (
                f"batch {batch[0].id}..{batch[-1].id} of writer {writer} is not contiguous: "
                f"positions {places}"
            )
