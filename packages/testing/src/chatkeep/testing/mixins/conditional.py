"""Stores that declare ``conditional`` (CONTRACT item 2): ``append_if`` appends only if the
log still ends where the caller last read it, atomically against every other writer."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

from chatkeep.core import (
    AppendConflict,
    Message,
    Record,
    RecordConflict,
    Store,
    encode_records,
    new_id,
    read_view,
)
from chatkeep.core.views import edit_delete

from .._tracking import Tracker
from .._workers import WorkerFleet
from ..checks import new_session_id
from ..settings import SuiteSettings
from ._base import ConformanceBase

__all__ = ["ConditionalAppendTests", "ConditionalProcessTests"]

_THREADS = 6
_ROUNDS = 8


def _append_if(store: Store, session: str, batch: list[Record], after: str | None) -> None:
    method: Any = store.append_if
    method(session, batch, after=after)


def _last_id(store: Store, session: str) -> str | None:
    tail = store.read(session, -1)
    return tail[0].id if tail else None


def _check_round(
    log: list[Record], round_number: int, contenders: set[str], won: list[str]
) -> None:
    assert len(won) == 1, f"round {round_number}: {len(won)} conditional appends won: {won}"
    ids = [record.id for record in log]
    assert ids[-1] == won[0], f"round {round_number}: the log ends with {ids[-1]}, not {won[0]}"
    stored = contenders & set(ids)
    assert stored == {won[0]}, f"round {round_number}: losers' records were stored: {stored}"


class ConditionalAppendTests(ConformanceBase):
    """``append_if(session, records, after=last_id)``: exactly one of several racing writers
    wins; a stale expectation raises ``AppendConflict`` and stores nothing; an exact retry of
    an acknowledged conditional append is a no-op success."""

    def test_appends_only_after_the_expected_record(self, chatkeep_store: Store) -> None:
        session = new_session_id("cond")
        a, b, c = Record("a", b"A"), Record("b", b"B"), Record("c", b"C")
        _append_if(chatkeep_store, session, [a], None)
        with pytest.raises(AppendConflict) as error:
            _append_if(chatkeep_store, session, [b], None)
        assert getattr(error.value, "session_id", None) == session
        assert getattr(error.value, "expected", "unset") is None
        _append_if(chatkeep_store, session, [b], "a")
        with pytest.raises(AppendConflict) as stale:
            _append_if(chatkeep_store, session, [c], "a")
        assert getattr(stale.value, "expected", None) == "a"
        with pytest.raises(AppendConflict):
            _append_if(chatkeep_store, session, [c], "no-such-record")
        assert chatkeep_store.read(session) == [a, b], "a refused append stored something"
        _append_if(chatkeep_store, session, [c], "b")
        assert chatkeep_store.read(session) == [a, b, c]

    def test_exact_retry_of_an_acknowledged_append_is_a_no_op(self, chatkeep_store: Store) -> None:
        session = new_session_id("cond")
        first, second = [Record("u1", b"1")], [Record("u2", b"2"), Record("u3", b"3")]
        _append_if(chatkeep_store, session, first, None)
        _append_if(chatkeep_store, session, second, "u1")
        chatkeep_store.append(session, [Record("other", b"x")])
        # The condition is stale now, but every record is stored already: success, no-op.
        _append_if(chatkeep_store, session, second, "u1")
        _append_if(chatkeep_store, session, first, None)
        assert [r.id for r in chatkeep_store.read(session)] == ["u1", "u2", "u3", "other"]

    def test_partly_stored_batch_is_checked_against_the_current_end(
        self, chatkeep_store: Store
    ) -> None:
        session = new_session_id("cond")
        chatkeep_store.append(session, [Record("a", b"A"), Record("b", b"B")])
        with pytest.raises(AppendConflict):
            _append_if(chatkeep_store, session, [Record("b", b"B"), Record("n", b"N")], "a")
        assert [r.id for r in chatkeep_store.read(session)] == ["a", "b"]
        _append_if(chatkeep_store, session, [Record("b", b"B"), Record("n", b"N")], "b")
        assert [r.id for r in chatkeep_store.read(session)] == ["a", "b", "n"]
        with pytest.raises(RecordConflict):
            _append_if(chatkeep_store, session, [Record("a", b"other")], "n")
        assert [r.id for r in chatkeep_store.read(session)] == ["a", "b", "n"]

    def test_threads_racing_at_the_same_state_one_wins_each_round(
        self, chatkeep_store: Store
    ) -> None:
        session = new_session_id("cond")
        barrier = threading.Barrier(_THREADS)
        lock = threading.Lock()
        errors: list[BaseException] = []
        for round_number in range(_ROUNDS):
            after = _last_id(chatkeep_store, session)
            won: list[str] = []
            contenders = {f"t{n}.r{round_number}" for n in range(_THREADS)}

            def contend(name: str, expected: str | None = after, won: list[str] = won) -> None:
                try:
                    barrier.wait(30)
                    _append_if(chatkeep_store, session, [Record(name, name.encode())], expected)
                except AppendConflict:
                    return
                except BaseException as exc:
                    with lock:
                        errors.append(exc)
                    return
                with lock:
                    won.append(name)

            threads = [threading.Thread(target=contend, args=(n,)) for n in sorted(contenders)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(60)
            assert not errors, f"round {round_number}: a writer failed: {errors[0]!r}"
            _check_round(chatkeep_store.read(session), round_number, contenders, won)
        assert len(chatkeep_store.read(session)) == _ROUNDS

    def test_async_conditional_append(self, chatkeep_store: Store) -> None:
        session = new_session_id("cond")

        async def scenario() -> None:
            method: Any = chatkeep_store.aappend_if
            await method(session, [Record("a", b"A")], after=None)
            with pytest.raises(AppendConflict):
                await method(session, [Record("b", b"B")], after=None)
            await method(session, [Record("b", b"B")], after="a")

        asyncio.run(scenario())
        assert [r.id for r in chatkeep_store.read(session)] == ["a", "b"]

    def test_concurrent_deletes_remove_different_messages(self, chatkeep_store: Store) -> None:
        """In-place edits (``chatkeep.core.views.edit_delete``) are appended with
        ``append_if``: threads deleting the last message at once remove different ones."""
        session = new_session_id("edit")
        texts = [f"m{i}" for i in range(12)]
        chatkeep_store.append(
            session, encode_records([Message.user(t, message_id=new_id()) for t in texts])
        )
        barrier = threading.Barrier(4)
        removed: list[str] = []
        lock = threading.Lock()

        def delete_three() -> None:
            barrier.wait(30)
            for _ in range(3):
                text = edit_delete(chatkeep_store, session).text
                with lock:
                    removed.append(text)

        threads = [threading.Thread(target=delete_three) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
        assert sorted(removed) == sorted(texts), "a message was deleted twice"
        assert read_view(chatkeep_store, session) == []


class ConditionalProcessTests(ConformanceBase):
    """Processes racing ``append_if`` at the same expected state: exactly one wins a round."""

    def test_processes_racing_at_the_same_state_one_wins_each_round(
        self,
        chatkeep_url: str,
        chatkeep_store: Store,
        chatkeep_workers: WorkerFleet,
        chatkeep_tracker: Tracker,
        chatkeep_settings: SuiteSettings,
    ) -> None:
        session = new_session_id("cond-procs")
        chatkeep_tracker.sessions().add(session)
        workers = range(chatkeep_settings.processes)
        for round_number in range(4):
            after = _last_id(chatkeep_store, session)
            start_at = time.time() + 0.3
            names = {index: f"p{index}.r{round_number}" for index in workers}
            outcomes = chatkeep_workers.run(
                {
                    index: {
                        "op": "append_if",
                        "url": chatkeep_url,
                        "options": {},
                        "session_id": session,
                        "records": [(name, name.encode())],
                        "after": after,
                        "start_at": start_at,
                    }
                    for index, name in names.items()
                }
            )
            unexpected = [
                o.describe()
                for o in outcomes.values()
                if not o.ok and o.error_type != "AppendConflict"
            ]
            assert not unexpected, "\n".join(unexpected)
            won = [names[index] for index, outcome in outcomes.items() if outcome.ok]
            _check_round(chatkeep_store.read(session), round_number, set(names.values()), won)
            # The winner's exact retry (its condition is stale now) is a no-op success.
            retry = chatkeep_workers.run(
                {
                    0: {
                        "op": "append_if",
                        "url": chatkeep_url,
                        "options": {},
                        "session_id": session,
                        "records": [(won[0], won[0].encode())],
                        "after": after,
                    }
                }
            )
            assert retry[0].ok, retry[0].describe()
        assert len(chatkeep_store.read(session)) == 4
