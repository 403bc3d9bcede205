"""The built-in ``memory://`` backend passes the whole suite, used the documented ways."""

from __future__ import annotations

import json

import pytest

from chatkeep.testing import StoreConformance, run_conformance


class TestMemoryConformance(StoreConformance):
    """The documented subclass pattern: override ``chatkeep_url``."""

    @pytest.fixture
    def chatkeep_url(self) -> str:
        return "memory://"


def test_runner_reports_memory_as_full() -> None:
    report = run_conformance("memory://", quiet=True)
    assert report.ok, report.format()
    assert report.level == "full"
    assert report.backend == "memory"
    assert report.declared == {
        "delete", "list_sessions", "close", "conditional", "namespace", "recent"
    }  # fmt: skip
    statuses = {row.name: row.status for row in report.capabilities}
    assert statuses == {
        "core": "pass",
        "delete": "pass",
        "list_sessions": "pass",
        "close": "pass",
        "shared": "not declared",
        "durable": "not declared",
        "ttl": "not declared",
        "conditional": "pass",
        "namespace": "pass",
        "recent": "pass",
        "fulltext": "not declared",  # memory keeps no index: search scans it
        "views": "pass",
        "lifecycle": "pass",
        "damage": "not provided",
        "erasure": "not provided",
        "durability": "not provided",
        "expiry": "not declared",
        "ties": "pass",
    }
    counts = report.counts
    assert counts["failed"] == 0
    assert counts["passed"] >= 60
    # The scan's tests run (under list_sessions), the index's are skipped by choice.
    searched = {o.outcome for o in report.outcomes if o.name.startswith("SearchTests.")}
    assert searched == {"passed"}
    indexed = [o for o in report.outcomes if o.name.startswith("FulltextTests.")]
    assert indexed and all(o.skipped_by_choice and o.group == "fulltext" for o in indexed)
    # Every skip is the store's choice (a capability or test hook it does not offer).
    assert all(o.skipped_by_choice for o in report.outcomes if o.outcome == "skipped")
    assert report.output and "passed" in report.output


def test_report_formats_and_serializes() -> None:
    report = run_conformance("memory://", quiet=True)
    text = report.format()
    assert "level:    full" in text
    assert "list_sessions" in text and "not declared" in text
    data = json.loads(json.dumps(report.as_dict()))
    assert data["ok"] is True
    assert data["level"] == "full"
    assert data["capabilities"]["delete"]["status"] == "pass"
    assert data["capabilities"]["shared"]["status"] == "not declared"
    assert data["failures"] == []


def test_a_narrowed_run_is_never_full() -> None:
    report = run_conformance("memory://", extra_args=["-k", "SliceTests or slices"], quiet=True)
    assert 0 < report.counts["total"] < 20
    # Only slice tests ran: the core is shown incomplete, the rest untested, and the level
    # says the run cannot vouch for the store.
    assert report.narrowed
    assert report.capability("core").status == "incomplete"
    assert report.capability("delete").status == "untested"
    assert report.level == "partial"
    assert any("narrowed" in note for note in report.notes)
    assert "narrowed run" in report.format()


def test_unknown_backend_gives_a_failed_report_without_a_table() -> None:
    report = run_conformance("nosuchbackend://x", quiet=True)
    assert not report.ok
    assert report.level == "failed"
    assert report.error is not None and "could not open the store" in report.error
    assert "nosuchbackend" in report.error
    text = report.format()
    assert "NOT OK" in text
    assert "(unknown: the store did not open)" in text
    assert "capability" not in text, "no table of statuses for a store that never opened"


def test_password_is_not_shown() -> None:
    report = run_conformance("nosuchbackend://user:hunter2@host/db", quiet=True)
    assert "hunter2" not in report.format()
    assert "hunter2" not in json.dumps(report.as_dict())
