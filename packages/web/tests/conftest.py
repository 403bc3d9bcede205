"""Fixtures: a store on SQLite, Redis and PostgreSQL holding every kind of record the page shows
(a tool call and its result, reasoning, an image, an SVG, an undone turn, a compaction
checkpoint, a fork, a long session) and a corpus of hostile messages, served by the app.

The servers come from :mod:`chatkeep.testing.servers` (Redis and PostgreSQL on their
standard ports; a missing one skips, or fails under ``CI=true``).
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from chatkeep.core import (
    DataContent,
    FunctionCallContent,
    FunctionResultContent,
    Message,
    ReasoningContent,
    Store,
    TextContent,
    UriContent,
    encode_records,
    open_store,
)
from chatkeep.core.ids import new_id
from chatkeep.core.metadata import utc_stamp
from chatkeep.core.views import compact, fork, undo
from chatkeep.testing.servers import (  # noqa: F401  (fixtures)
    fresh_store_url,
    postgres_url,
    redis_url,
)

#: A 1x1 PNG.
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)
SVG = b'<svg xmlns="http://www.w3.org/2000/svg"><script>alert("svg")</script></svg>'
#: Each would run script or break the page if it were not escaped.
HOSTILE_TEXTS = [
    "<script>alert('script')</script>",
    "<img src=x onerror=\"alert('onerror')\">",
    "[click me](javascript:alert('link'))",
    '</article></li></ol></main><script>alert("close")</script>',
    "<svg onload=alert('svg-onload')>",
    '"><iframe src="javascript:alert(1)"></iframe>',
]
HOSTILE_ID = "<img src=x onerror=alert('id')>\"&'/../?#"


def _message(role: str, *contents: object, author: str | None = None) -> Message:
    return Message(role, list(contents), author_name=author, message_id=new_id())  # type: ignore[arg-type]


def _append(store: Store, session_id: str, *messages: Message) -> None:
    store.append(session_id, encode_records(messages, stored_at=utc_stamp()))


@dataclass(frozen=True)
class Corpus:
    """The sessions written: ``trip`` (tool call, result, reasoning, image, SVG, an undone
    turn, forked), ``fork`` (continues ``trip``), ``compacted`` (a checkpoint), ``long``
    (``long_messages`` messages), ``hostile`` (every hostile text, id included)."""

    url: str
    trip: str
    fork: str
    fork_point: str
    compacted: str
    long: str
    hostile: str
    long_messages: int


def write_corpus(url: str, long_messages: int = 250) -> Corpus:
    """Write the corpus into the store at ``url``."""
    store = open_store(url)
    try:
        trip, compacted, long, hostile = "trip", "compacted", "long", HOSTILE_ID
        first = _message("user", TextContent("Plan a **trip** to Oslo"), author="ada")
        _append(
            store,
            trip,
            first,
            _message(
                "assistant",
                ReasoningContent("The user wants weather first."),
                FunctionCallContent("call-1", "weather", {"city": "Oslo", "days": [1, 2]}),
            ),
            _message("tool", FunctionResultContent("call-1", {"temp": 21, "sky": "clear"})),
            _message(
                "assistant",
                TextContent("It is *21°C* and clear. See [the forecast](https://example.org/f)."),
                DataContent(PNG, "image/png"),
                DataContent(SVG, "image/svg+xml"),
            ),
        )
        fork_point = store.read(trip, -1)[0].id
        _append(store, trip, _message("user", TextContent("Actually, Bergen?")))
        _append(store, trip, _message("assistant", TextContent("Bergen is rainy.")))
        undo(store, trip)
        child = fork(store, trip, fork_point, new_session_id="trip-fork")
        _append(store, child, _message("user", TextContent("And Stockholm?")))

        for turn in range(4):
            _append(
                store,
                compacted,
                _message("user", TextContent(f"question {turn}")),
                _message("assistant", TextContent(f"answer {turn}")),
            )
        compact(
            store,
            compacted,
            lambda view: [_message("system", TextContent("Summary of 3 turns")), *view[-2:]],
        )
        _append(store, compacted, _message("user", TextContent("after the checkpoint")))

        batch = [
            _message("user" if n % 2 == 0 else "assistant", TextContent(f"long message {n}"))
            for n in range(long_messages)
        ]
        for start in range(0, len(batch), 500):
            _append(store, long, *batch[start : start + 500])

        _append(
            store,
            hostile,
            *(_message("user", TextContent(text), author=text) for text in HOSTILE_TEXTS),
            _message(
                "tool",
                FunctionResultContent("<b onmouseover=alert('call')>", {"html": HOSTILE_TEXTS[0]}),
            ),
            _message(
                "assistant",
                FunctionCallContent("x", "<script>alert('name')</script>", HOSTILE_TEXTS[1]),
                UriContent("javascript:alert('uri')", "text/html"),
                DataContent(SVG, "image/svg+xml"),
                DataContent(b"<html><script>alert('html')</script>", "text/html"),
            ),
        )
        return Corpus(url, trip, child, fork_point, compacted, long, hostile, long_messages)
    finally:
        store.close()


@pytest.fixture(scope="session")
def corpus_writer() -> Callable[..., Corpus]:
    """:func:`write_corpus`, for tests that write their corpus in a fixture of their own."""
    return write_corpus


@pytest.fixture(params=["sqlite", "redis", "postgres"])
def corpus(request: pytest.FixtureRequest, tmp_path: Path) -> Corpus:
    """The corpus in a fresh store on SQLite, Redis and PostgreSQL (the browser tests use
    SQLite and Redis)."""
    return write_corpus(fresh_store_url(request.param, request, tmp_path))


@pytest.fixture
def read_only_store(corpus: Corpus) -> Iterator[Store]:
    """The corpus's store opened as ``chatkeep serve`` opens it."""
    from chatkeep.cli.stores import StoreChoice, open_store_for

    store = open_store_for(StoreChoice(corpus.url, "--url"), read_only=True)
    yield store
    store.close()
