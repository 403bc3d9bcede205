"""The ``fulltext`` capability on SQLite: schema version 3's FTS5 table, written in the
append's transaction, and ``build_index`` for a file written before it."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from chatkeep.core import Record, Store, open_store, search
from chatkeep.core.search_index import build_index
from chatkeep.sqlite import SQLiteStore
from chatkeep.sqlite.fulltext import FULLTEXT_TABLE, match_expression
from chatkeep.sqlite.migrations import schema_version

from .test_recent import _version_1_file, chat


def _found(store: Store, query: str, **options: object) -> list[str]:
    return [hit.session_id for hit in search(store, query, limit=None, **options)]  # type: ignore[arg-type]


def _indexed_rows(path: Path) -> int:
    with sqlite3.connect(path) as connection:
        return int(connection.execute(f"SELECT count(*) FROM {FULLTEXT_TABLE}").fetchone()[0])


def test_an_append_indexes_its_words_in_its_own_transaction(db_path: Path) -> None:
    store = open_store(f"sqlite:///{db_path}")
    assert store.supports("fulltext") and store.fulltext_ready()
    chat(store, "s", "The Oslo invoice")
    assert _indexed_rows(db_path) == 2  # the question and the answer
    store.append("raw", [Record("r", b"not a chatkeep record")])
    assert _indexed_rows(db_path) == 2  # nothing to index: no row
    store.delete("s")
    assert _indexed_rows(db_path) == 0
    assert _found(store, "oslo") == []


def test_each_record_s_words_sit_at_its_own_row_id_first_time_and_on_retry(
    db_path: Path,
) -> None:
    """An append hands the index the rows it stored (no lookup); a retry, which stores
    nothing or only the missing records, looks them up: either way the words of a record
    are at the record's row id (what a delete and the backlog count on)."""
    store = open_store(f"sqlite:///{db_path}")

    def message(text: str) -> bytes:
        contents = f'[{{"type":"text","text":"{text}"}}]'
        return f'{{"type":"message","role":"user","contents":{contents}}}'.encode()

    store.append("s", [Record("a", message("alpha")), Record("b", message("beta"))])
    store.append("t", [Record("x", message("xray"))])
    store.append("s", [Record("c", message("gamma"))])
    store.append("s", [Record("c", message("gamma")), Record("d", message("delta"))])  # retry
    store.append("s", [Record("c", message("gamma"))])  # an exact retry: stores nothing
    with sqlite3.connect(db_path) as connection:
        stored = connection.execute(
            f"SELECT f.words, r.record_id FROM {FULLTEXT_TABLE} AS f "
            "JOIN chatkeep_records AS r ON r.id = f.rowid ORDER BY f.rowid"
        ).fetchall()
    assert stored == [("alpha", "a"), ("beta", "b"), ("gamma", "c"), ("delta", "d"), ("xray", "x")]


def test_a_file_from_before_the_index_is_built_resumably(db_path: Path) -> None:
    _version_1_file(db_path)
    store = Store(SQLiteStore(db_path))
    assert schema_version(store.backend._handle().connection) == 3  # type: ignore[attr-defined]
    assert store.fulltext_pending() == 7 and not store.fulltext_ready()
    progress: list[bool] = []
    hits = search(store, "about", progress=lambda state: progress.append(state.indexed))
    assert [hit.session_id for hit in hits] == ["newest", "newer", "older"]
    assert progress and not any(progress)  # an incomplete index is not used: a scan
    chat(store, "later", "about later")  # indexed as it is appended
    assert store.fulltext_pending() == 7
    seen: list[tuple[int, int]] = []
    assert build_index(store, batch=4, progress=lambda *state: seen.append(state)) == 7
    assert seen == [(4, 7), (7, 7)]
    assert _found(store, "about") == ["later", "newest", "newer", "older"]


def test_an_interrupted_build_goes_on_where_it_stopped(db_path: Path) -> None:
    _version_1_file(db_path)
    store = Store(SQLiteStore(db_path))

    def stop(done: int, total: int) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        build_index(store, batch=4, progress=stop)
    assert store.fulltext_pending() == 3
    assert build_index(store) == 3
    assert store.fulltext_ready() and store.fulltext_pending() == 0
    assert build_index(store) == 0
    progress: list[bool] = []
    hits = search(store, "about", progress=lambda state: progress.append(state.indexed))
    assert [hit.session_id for hit in hits] == ["newest", "newer", "older"]
    assert progress == [True, True, True]
    assert _found(store, "about") == _found(store, "about", use_index=False)


def test_the_match_expression_quotes_every_word() -> None:
    assert match_expression([["oslo", "inv"], ["chatkeep_fork"]]) == (
        '("oslo"* AND "inv"*) OR ("chatkeep"* AND "fork"*)'
    )
    assert match_expression([['a"b OR c']]) == '("a"* AND "b"* AND "OR"* AND "c"*)'
    assert match_expression([[], ["--"]]) is None
