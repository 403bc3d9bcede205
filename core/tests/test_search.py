"""chatkeep.core.search: the query syntax, what is searched, views, filters, streaming."""

from __future__ import annotations

import asyncio
import itertools
from datetime import datetime, timedelta, timezone

import pytest

from chatkeep.core import (
    AgentSession,
    FunctionCallContent,
    FunctionResultContent,
    HistoryProvider,
    InvalidOption,
    Message,
    Store,
    TextContent,
    asearch,
    search,
)
from chatkeep.core.memory import MemoryStore
from chatkeep.core.search_text import (
    FORK_WORD,
    MAX_INDEX_WORD,
    MAX_INDEX_WORDS_BYTES,
    UNINDEXED_WORD,
    FoldedText,
    index_terms,
    index_words,
    parse_query,
    words,
)
from chatkeep.core.views import compact, edit_replace, fork, undo

from .conftest import CountingBackend

_ids = itertools.count()


def message(role: str, *contents: str | object) -> Message:
    parts = [TextContent(c) if isinstance(c, str) else c for c in contents]
    return Message(role, parts, message_id=f"m{next(_ids):06d}")  # type: ignore[arg-type]


def save(store: Store, session_id: str, *messages: Message) -> None:
    asyncio.run(HistoryProvider(store).save(AgentSession(session_id), list(messages)))


def found(store: Store, query: str, **options: object) -> list[tuple[str, int | None]]:
    return [(hit.session_id, hit.position) for hit in search(store, query, **options)]  # type: ignore[arg-type]


@pytest.fixture
def store() -> Store:
    store = Store(MemoryStore())
    save(store, "a", message("user", "Where is the Oslo invoice?"))
    save(store, "a", message("assistant", "The Ålesund INVOICE is filed."))
    save(
        store,
        "b",
        message("user", "weather in oslo"),
        message("assistant", FunctionCallContent("c1", "get_weather", {"city": "Bergen"})),
        message("tool", FunctionResultContent("c1", {"temperature": "minus three"})),
    )
    return store


def test_words_are_all_required_case_and_accent_insensitive(store: Store) -> None:
    assert found(store, "oslo invoice") == [("a", 0)]
    assert found(store, "ALESUND") == [("a", 1)]
    assert found(store, "Ålesund invoice") == [("a", 1)]
    assert found(store, "oslo") == [("b", 0), ("a", 0)]  # newest session first
    assert found(store, "nowhere") == []


def test_a_word_matches_the_start_of_words_and_a_phrase_whole_words(store: Store) -> None:
    assert found(store, "invoi") == [("a", 1), ("a", 0)]
    assert found(store, '"oslo invoice"') == [("a", 0)]
    assert found(store, '"invoice oslo"') == []
    assert found(store, '"invoi"') == []


def test_excluded_words_and_phrases(store: Store) -> None:
    assert found(store, "oslo -invoice") == [("b", 0)]
    assert found(store, 'oslo -"the oslo"') == [("b", 0)]


def test_tool_calls_and_results_are_searched(store: Store) -> None:
    assert found(store, "get_weather bergen") == [("b", 1)]
    assert found(store, "minus three temperature") == [("b", 2)]


def test_a_hit_says_what_and_where(store: Store) -> None:
    before = datetime.now(timezone.utc)
    save(store, "c", message("user", "x " * 200 + "the Oslo invoice " + "y " * 200))
    (hit,) = search(store, "oslo invoice", prefix="c")
    assert (hit.session_id, hit.role, hit.position, hit.retracted) == ("c", "user", 0, False)
    assert hit.stored_at is not None and hit.stored_at >= before - timedelta(seconds=1)
    assert "[Oslo] [invoice]" in hit.marked()
    assert hit.snippet.startswith("…") and hit.snippet.endswith("…")
    assert len(hit.snippet) < 200
    assert hit.to_json()["highlights"] == [list(span) for span in hit.highlights]


def test_views_apply_and_retracted_turns_match_only_when_asked(store: Store) -> None:
    save(store, "a", message("user", "a draft about oslo"))
    assert ("a", 2) in found(store, "draft")
    undo(store, "a")
    assert found(store, "draft") == []
    hits = list(search(store, "draft", include_retracted=True))
    assert [(h.session_id, h.position, h.retracted) for h in hits] == [("a", None, True)]


def test_forks_compaction_and_edits(store: Store) -> None:
    fork(store, "a", new_session_id="f")
    assert sorted(found(store, "alesund")) == [("a", 1), ("f", 1)]
    compact(store, "a", lambda view: view[-1:])
    assert found(store, "alesund", prefix="a") == [("a", 0)]
    assert found(store, "oslo invoice", prefix="a") == []
    edit_replace(store, "f", 1, message("assistant", "redacted"))
    assert found(store, "alesund", prefix="f") == []


def test_filters_roles_time_and_limit(store: Store) -> None:
    assert found(store, "oslo", roles=["user"]) == [("b", 0), ("a", 0)]
    assert found(store, "oslo", roles=["assistant"]) == []
    assert found(store, "oslo", since=timedelta(hours=1)) == [("b", 0), ("a", 0)]
    assert found(store, "oslo", until=timedelta(hours=1)) == []
    future = datetime.now(timezone.utc) + timedelta(hours=1)
    assert found(store, "oslo", since=future) == []
    assert found(store, "oslo", limit=1) == [("b", 0)]
    assert found(store, "oslo", limit=0) == []


def test_bad_arguments_raise_at_the_call(store: Store) -> None:
    for bad in ("", "   ", "-oslo", '""', "x" * 1001):
        with pytest.raises(InvalidOption):
            search(store, bad)
    with pytest.raises(InvalidOption):
        search(store, "oslo", limit=-1)
    with pytest.raises(InvalidOption):
        search(store, "oslo", roles="user")
    with pytest.raises(InvalidOption):
        search(store, "oslo", since="yesterday")  # type: ignore[arg-type]


def test_query_syntax() -> None:
    query = parse_query('Oslo "the  Invoice" -draft -"first draft" get_weather')
    assert query.words == ("oslo",)
    assert query.phrases == (("the", "invoice"), ("get", "weather"))
    assert query.excluded_words == ("draft",)
    assert query.excluded_phrases == (("first", "draft"),)
    assert query.required == ("oslo", "the", "invoice", "get", "weather")


def test_the_scan_streams_one_session_at_a_time() -> None:
    backend = CountingBackend()
    store = Store(backend)
    for n in range(30):
        save(store, f"s{n:02d}", message("user", f"needle {n}"))
    backend.reads.clear()
    hits = search(store, "needle", limit=None)
    assert backend.reads == []  # nothing read before the first hit is asked for
    first = next(hits)
    assert first.session_id == "s29"
    assert {read[0] for read in backend.reads} == {"s29"}
    hits.close()  # type: ignore[attr-defined]  # stopping the iteration stops the scan
    assert {read[0] for read in backend.reads} == {"s29"}


def test_asearch_matches_search(store: Store) -> None:
    async def collect() -> list[tuple[str, int | None]]:
        return [(hit.session_id, hit.position) async for hit in asearch(store, "oslo")]

    assert asyncio.run(collect()) == found(store, "oslo")


def test_index_words_stay_inside_every_index_limit() -> None:
    """A huge word is cut (PostgreSQL refuses a lexeme over 2047 bytes), and a record
    whose words would take more than the bound is handed the always-candidate word
    (a ``tsvector`` holds at most 1 MB), so an append never fails because of the index."""
    huge = "é" * 1_000_000
    assert index_words([Message("user", [TextContent(f"a {huge} b")])]) == (
        "a " + "e" * MAX_INDEX_WORD + " b"
    )
    many = " ".join(f"w{n}" for n in range(MAX_INDEX_WORDS_BYTES // 3))
    assert index_words([Message("user", [TextContent(many)])]) == UNINDEXED_WORD
    assert index_words([Message("user", [TextContent(many)])], fork=True) == (
        f"{UNINDEXED_WORD} {FORK_WORD}"
    )
    assert index_words([], fork=True) == FORK_WORD
    # a query word is cut the same way, so it still matches the cut word's start
    assert index_terms(["oslo", "x" * 500, "x" * 300]) == ["oslo", "x" * MAX_INDEX_WORD]


def test_ascii_text_is_cut_into_the_same_words_as_any_other() -> None:
    """ASCII text takes a faster path than the regular expression every other text takes:
    both cut at every character that is not a letter or a digit, underscore included."""
    import re
    import string

    pattern = re.compile(r"[^\W_]+")
    samples = [string.printable, "get_weather(city='Oslo')", "a\tb\x00c\x7fd", "", "__"]
    samples += [string.printable[n:] + string.printable[:n] for n in range(0, 100, 7)]
    for text in samples:
        assert words(text) == pattern.findall(text.lower()), text
    assert words("Ålesund_Øst 2x") == ["alesund", "øst", "2x"]


def test_ascii_text_is_placed_like_any_other() -> None:
    """A folded text's words and their places: ASCII text finds them without the regular
    expression (and only once a match is marked), every other text with it; both must
    give the regular expression's words and spans."""
    import random
    import re
    import string

    pattern = re.compile(r"[^\W_]+")
    rng = random.Random(27)
    samples = [string.printable, "get_weather(city='Oslo')", "aa a aaa a", "", "__", "x"]
    samples += ["".join(rng.choice("ab_ 1.\t") for _ in range(40)) for _ in range(200)]
    for text in samples:
        folded = FoldedText(text)
        expected = [(m.group(), m.start(), m.end()) for m in pattern.finditer(text.lower())]
        assert folded.words == [word for word, _, _ in expected], text
        assert folded.spans == expected, text
    accented = FoldedText("Ålesund_Øst, aa")
    assert accented.words == ["alesund", "øst", "aa"]
    assert [accented.original_span(start, end) for _, start, end in accented.spans] == [
        (0, 7),
        (8, 11),
        (13, 15),
    ]
    query = parse_query('aa "a aaa"')
    assert query.match(FoldedText("aa a aaa a")) == [(0, 2), (3, 8), (5, 8)]
