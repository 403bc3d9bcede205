"""The suite can fail: each deliberately broken backend is caught by the tests aimed at its
bug, and the correct backends it is derived from pass everything.

A broken backend changes one method of a correct one (``dict``, ``paged`` or ``sqlfile`` in
``chatkeep_testing_examples``). Each case runs the whole suite against it and compares
with the correct backend's run: the tests that newly fail must include the ones named, and
the report rows that newly fail must be exactly the ones named (the bug is confined).

``SELF_CHECK`` is the table of issue 17's deliverable 3: promise, broken backend, tests
that catch it. ``test_every_promise_has_a_broken_backend`` keeps it complete.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from typing import Any

import pytest
from chatkeep_testing_examples import BROKEN, BROKEN_FILES  # type: ignore[import-not-found]

from chatkeep.core.views import _erase
from chatkeep.testing import ConformanceReport, run_conformance

pytestmark = pytest.mark.slow

# promise -> (broken backend, base it breaks, tests that must newly fail, rows that fail)
SELF_CHECK: dict[str, tuple[str, str, set[str], set[str]]] = {
    "read(start, stop) has Python slice semantics": (
        "negstart", "dict", {"SliceTests.test_slices_match_python", "SliceTests.test_tail_reads"},
        {"core", "delete", "views"},
    ),
    "a retried batch is a no-op": (
        "retrydup", "dict", {"RetryTests.test_same_batch_retry_is_a_no_op"}, {"core"},
    ),
    "data round-trips byte for byte": (
        "nuldrop", "dict", {"PayloadTests.test_binary_payloads_round_trip"}, {"core"},
    ),
    "distinct session ids stay apart": (
        "caseids", "dict", {"HostileIdTests.test_hostile_ids_are_kept_apart"},
        {"core", "delete", "list_sessions"},
    ),
    "callers and the store share no mutable state": (
        "aliasing", "dict", {"MutationSafetyTests.test_reads_return_a_new_list_each_time"},
        {"core"},
    ),
    "listing prefixes are literal": (
        "globprefix", "dict",
        {"ListSessionsTests.test_wildcard_characters_in_prefix_are_literal"},
        {"list_sessions"},
    ),
    "delete erases that session only": (
        "prefixdelete", "dict", {"DeleteTests.test_delete_leaves_other_sessions_alone"},
        {"delete"},
    ),
    "record ids are free again after delete": (
        "stickyids", "dict", {"DeleteTests.test_ids_are_free_after_delete_even_with_other_data"},
        {"delete"},
    ),
    "a stored id with other data raises RecordConflict": (
        "silentconflict", "dict",
        {"RecordIdempotencyTests.test_same_id_with_other_data_is_refused_whole"}, {"core"},
    ),
    "a batch mixing stored and new ids appends the new ones": (
        "mixeddrop", "dict",
        {"RecordIdempotencyTests.test_partly_stored_batches_append_only_the_new_records"},
        {"core"},
    ),
    "a tail read costs what it returns": (
        "tailscan", "dict", {"TailCostTests.test_warm_tail_read_costs_what_it_returns"},
        {"core"},
    ),
    "an append costs its batch, not the log": (
        "appendscan", "dict", {"TailCostTests.test_append_costs_what_it_appends"}, {"core"},
    ),
    "unknown options raise InvalidOption": (
        "lenient", "dict", {"OptionTests.test_unknown_keyword_option_raises_invalid_option"},
        {"core"},
    ),
    "undecodable records are reported by the views": (
        "skipcorrupt", "dict", {"CorruptRecordTests.test_views_report_an_undecodable_record"},
        {"core", "views"},
    ),
    "a store holds more than 10 MiB": (
        "cap10", "dict", {"VolumeTests.test_a_session_holds_the_volume"}, {"core"},
    ),
    "long multi-byte prefixes are compared in full": (
        "prefix448", "dict", {"LongPrefixTests.test_long_multibyte_prefixes"}, {"list_sessions"},
    ),
    "listing pages keep ids that extend one another": (
        "pageskip", "paged", {"ListingPagesTests.test_many_pages_of_extending_ids"},
        {"list_sessions"},
    ),
    "listing pages list each id once": (
        "pagerepeat", "paged", {"ListingPagesTests.test_many_pages_of_extending_ids"},
        {"list_sessions"},
    ),
    "delete after a warm tail read erases the tail too": (
        "warmtail", "dict", {"DeleteTests.test_delete_after_a_warm_tail_read"}, {"delete"},
    ),
    "tail bounds are clamped to the session": (
        "unclamped", "dict", {"SliceTests.test_extreme_bounds"},
        {"core", "delete", "views", "list_sessions"},  # the listing's session counts too
    ),
    "listing pages keep the prefix": (
        "pageforget", "paged", {"ListingPagesTests.test_many_pages_of_extending_ids"},
        {"list_sessions"},
    ),
    "the listing is lazy: its first id costs a page": (
        "eager", "paged", {"ListingPagesTests.test_many_pages_of_extending_ids"},
        {"list_sessions"},
    ),
    "recent lists ties by id descending, across pages (hook)": (
        "memory-tieasc", "memory",
        {"RecentTieTests.test_recent_ties_by_id_descending_across_pages"}, {"ties"},
    ),
    "a tail bound far longer than the log reads the whole log": (
        "fartail", "dict", {"SliceTests.test_extreme_bounds"}, {"core"},
    ),
    "ttl expires sessions (reads and listing), appends refresh": (
        "sqlfile-ttl", "sqlfile", {"TtlTests.test_sessions_expire_unless_appended_to"}, {"ttl"},
    ),
    "an exact retry sets the expiry, an append without ttl clears it (hook)": (
        "sqlfile-retryttl", "sqlfile",
        {"TtlRetryTests.test_the_appending_handle_sets_or_clears_the_expiry"}, {"expiry"},
    ),
    "listing shows the store, from any handle and after reopen": (
        "sqlfile-handlelist", "sqlfile", {"ListingPagesTests.test_many_pages_of_extending_ids"},
        {"list_sessions"},
    ),
    "no cache outlives another handle's append or delete": (
        "sqlfile-cached", "sqlfile", {"CrossHandleTests.test_reads_after_another_handle_appended"},
        {"shared", "conditional"},
    ),
    "appends made one after another read back in that order": (
        "sqlfile-clock", "sqlfile",
        {"ProcessOrderTests.test_appends_from_processes_in_turn_keep_their_order"},
        {"shared", "durable", "conditional"},
    ),
    "a retry from another process after other appends is a no-op": (
        "sqlfile-handledup", "sqlfile",
        {"CrossProcessRetryTests.test_retry_from_another_process_after_other_appends"},
        {"shared", "durable", "conditional", "expiry"},  # TtlRetryTests retries too
    ),
    "append_if is atomic: one racing writer wins": (
        "sqlfile-racy", "sqlfile",
        {"ConditionalAppendTests.test_threads_racing_at_the_same_state_one_wins_each_round"},
        {"conditional"},
    ),
    "an exact retry of a conditional append is a no-op": (
        "sqlfile-strictcond", "sqlfile",
        {"ConditionalAppendTests.test_exact_retry_of_an_acknowledged_append_is_a_no_op"},
        {"conditional"},
    ),
    "nested namespaces are disjoint": (
        "sqlfile-joinedns", "sqlfile",
        {"NamespaceTests.test_same_session_id_in_every_namespace_is_separate"},
        {"namespace"},
    ),
    "invalid namespaces raise InvalidOption": (
        "sqlfile-anyns", "sqlfile",
        {"NamespaceTests.test_invalid_namespaces_raise_invalid_option"}, {"namespace"},
    ),
    "delete erases the bytes, not just the reads (hook)": (
        "sqlfile-keepbytes", "sqlfile", {"ErasureTests.test_delete_erases_the_bytes"},
        {"erasure"},
    ),
    "a durable store syncs by default (hook)": (
        "sqlfile-nofsync", "sqlfile",
        {"DurabilityClaimTests.test_durable_stores_default_to_surviving_power_loss"},
        {"durability"},
    ),
    "damage is reported, never a shorter history (hook)": (
        "sqlfile-shortened", "sqlfile", {"DamageTests.test_damage_is_reported_and_contained"},
        {"damage"},
    ),
    "a delete survives reopening, on every read path": (
        "sqlfile-tombstone", "sqlfile", {"DurableDeleteTests.test_delete_survives_reopen"},
        {"delete", "shared", "durable", "erasure"},
    ),
    "a cold handle's tail read costs what it returns": (
        "sqlfile-coldscan", "sqlfile",
        {"TailCostTests.test_cold_tail_read_costs_what_it_returns"}, {"core"},
    ),
    "what a process acknowledged survives it dying": (
        "sqlfile-writebehind", "sqlfile",
        {"CrashDurabilityTests.test_acknowledged_appends_survive_the_writer_dying"},
        {"list_sessions", "shared", "durable", "namespace"},
    ),
}  # fmt: skip

#: Sizes small enough to run the suite ~40 times, large enough for every bug here: several
#: pages of 100, more than 10 MiB (test_settings.py holds the defaults to their job).
SIZES = ["--chatkeep-listing-sessions=450", "--chatkeep-volume-mib=12"]

#: Promises whose self-check is not a backend: the core keeps them over the two hooks, so
#: the check breaks the core instead (see the tests at the end of this module).
CORE_PROMISES = {
    "deleting a forked session is crash-safe at every step": (
        "ForkDeletionFaultTests.test_interrupted_fork_deletion_completes_when_called_again"
    ),
    "every hook of a closed handle raises StoreClosed": (
        "ClosedHandleTests.test_every_hook_of_a_closed_handle_raises_store_closed"
    ),
}


def _scratch() -> str:
    # tmpfs where there is one: the SQLite stores sync every commit (they claim "power").
    root = "/dev/shm" if Path("/dev/shm").is_dir() else None
    return tempfile.mkdtemp(prefix="chatkeep-selfcheck-", dir=root)


def _url(scheme: str) -> str:
    return f"{scheme}://{_scratch()}/store.db" if scheme.startswith("sqlfile") else f"{scheme}://"


def _failed_tests(report: ConformanceReport) -> set[str]:
    # "SliceTests.test_x[param]" -> "SliceTests.test_x"
    return {f.name.split("[", 1)[0] for f in report.failures}


def _failed_rows(report: ConformanceReport) -> set[str]:
    return {row.name for row in report.capabilities if row.status == "fail"}


@pytest.fixture(scope="module")
def reports() -> Iterator[Callable[[str], ConformanceReport]]:
    cache: dict[str, ConformanceReport] = {}

    def report(scheme: str) -> ConformanceReport:
        if scheme not in cache:
            cache[scheme] = run_conformance(_url(scheme), extra_args=SIZES, quiet=True)
        return cache[scheme]

    yield report


@pytest.mark.parametrize("base", ["dict", "paged", "sqlfile"])
def test_the_correct_backends_pass(reports: Callable[[str], ConformanceReport], base: str) -> None:
    report = reports(base)
    assert report.ok, report.format()


def test_the_reference_store_passes_every_row(reports: Callable[[str], ConformanceReport]) -> None:
    report = reports("sqlfile")
    assert {row.name: row.status for row in report.capabilities} == {
        **{
            name: "pass"
            for name in (
                "core", "delete", "list_sessions", "close", "shared", "durable", "ttl",
                "conditional", "namespace", "views", "lifecycle", "damage", "erasure",
                "durability", "expiry",
            )
        },
        "recent": "not declared",
        "fulltext": "not declared",
        "ties": "not declared",
    }, report.format()  # fmt: skip


@pytest.mark.parametrize("promise", sorted(SELF_CHECK))
def test_broken_backend_is_caught(
    reports: Callable[[str], ConformanceReport], promise: str
) -> None:
    scheme, base, must_fail, rows = SELF_CHECK[promise]
    broken, correct = reports(scheme), reports(base)
    assert not broken.ok, broken.format()
    new_failures = _failed_tests(broken) - _failed_tests(correct)
    assert must_fail <= new_failures, f"not caught: {must_fail - new_failures}\n{broken.format()}"
    new_rows = _failed_rows(broken) - _failed_rows(correct)
    assert new_rows and new_rows <= rows, f"rows failed: {new_rows}\n{broken.format()}"


def test_every_promise_has_a_broken_backend() -> None:
    schemes = [scheme for scheme, *_ in SELF_CHECK.values()]
    assert len(schemes) == len(set(schemes)), "one broken backend per promise"
    assert set(schemes) == (set(BROKEN) | set(BROKEN_FILES)) - {"sqlfile-nonatomic"}


def test_non_atomic_batches_are_caught() -> None:
    # Its appends sleep per record, so only the tests aimed at it run (a narrowed run).
    report = run_conformance(
        _url("sqlfile-nonatomic"),
        extra_args=["-k", "partial_batch or processes_append or threads_append or async_appends"],
        quiet=True,
    )
    assert {
        "AtomicBatchTests.test_readers_never_see_a_partial_batch",
        "SharedStoreTests.test_processes_append_to_one_session",
        "ThreadConcurrencyTests.test_threads_append_to_one_session",
    } <= _failed_tests(report), report.format()
    assert report.capability("shared").status == "fail"
    assert report.level == "failed"


_ORIGINAL = _erase._make_self_contained


def _without_temporary_copy(
    child: str, first: Any, fork: Any, parent: str, parent_records: Any
) -> Generator[Any, Any, Any]:
    """The core's ``_make_self_contained`` with its crash-safe copy taken out: the fork is
    deleted and rewritten in place, so a failure in between loses it. The original's writes
    to the temporary session are swallowed (and its reads answered as if they happened)."""
    program = _ORIGINAL(child, first, fork, parent, parent_records)
    last_written: dict[str, Any] = {}
    value: Any = None
    while True:
        try:
            op = program.send(value)
        except StopIteration as done:
            return done.value
        session = getattr(op, "session_id", "")
        kind = type(op).__name__
        if session.startswith(_erase.TEMP_PREFIX):
            if kind == "Append":
                last_written[session] = op.records[-1]
            value = (
                [last_written[session]]
                if kind == "Read" and session in last_written
                else ([] if kind == "Read" else None)
            )
            continue
        if kind == "Append" and any(b"chatkeep.rebuild" in r.data for r in op.records):
            value = None  # no note of a rebuild in progress either
            continue
        value = yield op


def test_fork_deletion_without_its_crash_safe_copy_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_erase, "_make_self_contained", _without_temporary_copy)
    report = run_conformance("dict://", extra_args=["-k", "ForkDeletion"], quiet=True)
    test = CORE_PROMISES["deleting a forked session is crash-safe at every step"]
    assert test in _failed_tests(report), report.format()
    # The unchanged deletion tests still pass: only the crash-safety is gone.
    assert "ForkDeletionTests.test_default_keeps_every_fork_whole" not in _failed_tests(report)


def test_a_handle_left_open_after_close_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    from chatkeep.core import Store

    def close_but_stay_open(self: Store) -> None:
        self._call("close")  # type: ignore[attr-defined]  # forgets to mark the handle closed

    monkeypatch.setattr(Store, "close", close_but_stay_open)
    report = run_conformance("dict://", extra_args=["-k", "Closed"], quiet=True)
    test = CORE_PROMISES["every hook of a closed handle raises StoreClosed"]
    assert test in _failed_tests(report), report.format()
