"""The suite can fail: each deliberately broken backend is caught by the tests aimed at its
bug, and a correct shared, durable backend passes everything."""

from __future__ import annotations

from pathlib import Path

import pytest

from chatkeep.testing import run_conformance

# scheme -> (tests that must fail, capability rows that must fail, expected level)
# (a bug in the core hooks may fail other rows too: their tests read through the core)
CASES = {
    "negstart": (
        {"SliceTests.test_slices_match_python", "SliceTests.test_tail_reads"},
        {"core"},
        "failed",
    ),
    "retrydup": (
        {
            "RetryTests.test_same_batch_retry_is_a_no_op",
            "RetryTests.test_retry_after_later_batches_is_a_no_op",
            "ModelTests.test_reads_match_a_list_model",
        },
        {"core"},
        "failed",
    ),
    "nuldrop": (
        {
            "PayloadTests.test_binary_payloads_round_trip",
            "PayloadTests.test_each_binary_payload_alone",
        },
        {"core"},
        "failed",
    ),
    "caseids": (
        {
            "HostileIdTests.test_hostile_ids_are_kept_apart",
            "HostileIdTests.test_hostile_ids_do_not_alias_unwritten_ids",
            "HostileIdListingTests.test_hostile_ids_are_listed_back_exactly",
        },
        {"core", "list_sessions"},
        "failed",
    ),
    "aliasing": (
        {"MutationSafetyTests.test_reads_return_a_new_list_each_time"},
        {"core"},
        "failed",
    ),
    "globprefix": (
        {"ListSessionsTests.test_wildcard_characters_in_prefix_are_literal"},
        {"list_sessions"},
        "partial",
    ),
    "prefixdelete": (
        {"DeleteTests.test_delete_leaves_other_sessions_alone"},
        {"delete"},
        "partial",
    ),
    "stickyids": (
        {
            "DeleteTests.test_append_after_delete_starts_fresh",
            # making a fork self-contained re-appends its records under its own id
            "ForkDeletionTests.test_default_keeps_every_fork_whole",
        },
        {"delete"},
        "partial",
    ),
}


def _failed_tests(report_failures: tuple[object, ...]) -> set[str]:
    # "SliceTests.test_x[param]" -> "SliceTests.test_x"
    return {getattr(f, "name", "").split("[", 1)[0] for f in report_failures}


@pytest.mark.parametrize("scheme", sorted(CASES))
def test_broken_backend_is_caught(scheme: str) -> None:
    must_fail, failing_rows, level = CASES[scheme]
    report = run_conformance(f"{scheme}://", quiet=True)
    assert not report.ok, report.format()
    assert report.level == level, report.format()
    failed = _failed_tests(report.failures)
    assert must_fail <= failed, f"not caught: {must_fail - failed}\n{report.format()}"
    rows = {row.name for row in report.capabilities if row.status == "fail"}
    assert failing_rows <= rows, report.format()
    if level == "partial":
        # The bug is confined to one capability: everything else still passes.
        assert rows == failing_rows, report.format()


def test_correct_shared_durable_backend_passes(tmp_path: Path) -> None:
    report = run_conformance(f"sqlfile://{tmp_path / 'ok.db'}", quiet=True)
    assert report.ok, report.format()
    assert {row.name: row.status for row in report.capabilities} == {
        "core": "pass",
        "delete": "pass",
        "list_sessions": "pass",
        "close": "pass",
        "shared": "pass",
        "durable": "pass",
        "ttl": "not declared",
        "views": "pass",
        "lifecycle": "pass",
    }
    assert report.capability("shared").passed == 2


def test_non_atomic_batches_are_caught(tmp_path: Path) -> None:
    report = run_conformance(
        f"sqlfile-nonatomic://{tmp_path / 'broken.db'}",
        extra_args=["-k", "partial_batch or processes or threads_append or async_appends"],
        quiet=True,
    )
    failed = _failed_tests(report.failures)
    assert {
        "AtomicBatchTests.test_readers_never_see_a_partial_batch",
        "SharedStoreTests.test_processes_append_to_one_session",
        "ThreadConcurrencyTests.test_threads_append_to_one_session",
    } <= failed, report.format()
    assert report.capability("shared").status == "fail"
    assert report.level == "failed"
