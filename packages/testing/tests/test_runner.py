"""The runner's behaviour: options in any order, honest levels for narrowed, unopenable and
interrupted runs, and cleaning up what the suite wrote."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from chatkeep.core import open_store
from chatkeep.testing import run_conformance
from chatkeep.testing.__main__ import EXIT_INTERRUPTED, EXIT_NOT_RUN, main
from chatkeep.testing._scrub import Scrubber
from chatkeep.testing.runner import one_line


@pytest.mark.parametrize(
    "argv",
    [
        ["memory://", "--json", "--", "-k", "test_records_have_exact_types"],
        ["--json", "memory://", "--", "-k", "test_records_have_exact_types"],
        ["--json", "--keep-sessions", "memory://", "--", "-k", "test_records_have_exact_types"],
    ],
)
def test_options_go_in_any_order(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    code = main(argv)
    report = json.loads(capsys.readouterr().out)
    assert report["counts"]["passed"] == 1
    assert report["level"] == "partial" and report["narrowed"] is True
    assert code == 1, "a narrowed run is not a pass"


def test_a_store_that_cannot_open_exits_2_without_a_table(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["nosuchbackend://user:hunter2@host"]) == EXIT_NOT_RUN
    captured = capsys.readouterr()
    assert "could not open the store" in captured.err and captured.out == ""
    assert "capability" not in captured.err and "hunter2" not in captured.err


def test_an_interrupted_run_says_so() -> None:
    report = run_conformance("memory://", extra_args=["-p", "_interrupting_plugin"], quiet=True)
    assert report.interrupted
    assert report.level == "interrupted"
    assert not report.ok
    text = report.format()
    assert "level:    interrupted" in text
    assert "interrupted before it finished" in text
    assert all(row.status != "fail" for row in report.capabilities), text


def test_the_runner_exits_130_when_interrupted(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["memory://", "-q", "--", "-p", "_interrupting_plugin"]) == EXIT_INTERRUPTED
    assert "interrupted" in capsys.readouterr().out


def _sessions(name: str) -> list[str]:
    with open_store(f"memory://{name}") as store:
        return list(store.list_sessions())


def test_the_suite_removes_what_it_wrote() -> None:
    name = f"cleanup-{uuid.uuid4().hex}"
    report = run_conformance(
        f"memory://{name}", extra_args=["-k", "OrderTests or ForkTests"], quiet=True
    )
    assert report.counts["passed"] >= 8, report.format()
    assert _sessions(name) == []


def test_keep_sessions_keeps_them() -> None:
    name = f"kept-{uuid.uuid4().hex}"
    report = run_conformance(
        f"memory://{name}", extra_args=["-k", "OrderTests"], quiet=True, keep_sessions=True
    )
    assert report.counts["passed"] == 5, report.format()
    assert len(_sessions(name)) >= 5


def test_no_secret_of_the_url_in_any_output_of_a_failing_run(tmp_path: Path) -> None:
    secret = "Hunter2-s3cret"
    # The lenient example backend accepts unknown options: OptionTests fails on it, in a
    # test that takes `chatkeep_url` as an argument (shown in the traceback, and by -l).
    junit = tmp_path / "junit.xml"
    report = run_conformance(
        f"lenient://app:{secret}@host/x",
        extra_args=[
            "-k",
            "test_unknown_query_option_raises_invalid_option or test_records_have_exact_types",
            *("-l", "-v", "--tb=long", "-rA", f"--junitxml={junit}"),
        ],
        quiet=True,
    )
    assert report.counts["failed"] == 1 and report.counts["passed"] == 1, report.format()
    assert report.output is not None
    assert "chatkeep_url = 'lenient://app:***@host/x'" in report.output
    for shown in (report.output, report.format(), json.dumps(report.as_dict()), junit.read_text()):
        assert secret not in shown


def test_a_failure_names_the_rule_it_breaks_and_where_it_is_documented() -> None:
    report = run_conformance(
        "lenient://", extra_args=["-k", "test_unknown_keyword_option_raises"], quiet=True
    )
    assert report.counts["failed"] == 1, report.format()
    text = report.format()
    assert "rule: Options the backend does not know raise `InvalidOption`" in text
    assert "(see core/BACKENDS.md#2-urls-and-options)" in text
    (failure,) = report.as_dict()["failures"]
    assert failure["see"] == "core/BACKENDS.md#2-urls-and-options"
    assert failure["rule"].startswith("Options the backend does not know")


def test_the_level_line_says_what_only_missing_test_hooks_would_prove() -> None:
    report = run_conformance(
        "memory://", extra_args=["-k", "test_records_have_exact_types"], quiet=True
    )
    assert report.unproved == ("damage", "erasure", "durability")
    level = next(line for line in report.format().splitlines() if "level:" in line)
    assert "without test hooks, not proved: damage, erasure, durability" in level
    assert report.as_dict()["unproved"] == ["damage", "erasure", "durability"]


def test_a_shortened_comparison_keeps_where_the_sides_differ() -> None:
    # What pytest says for two 40-record lists differing in one byte of record 30.
    message = (
        "AssertionError: assert [('r0', b'xxx...xxxxxx'), ...] == [('r0', b'xxx...xxxxxx'), ...]"
        "\n  \n  At index 30 diff: ('r30', b'xxxxxxxx') != ('r30', b'xxxxxxxy')"
        "\n  Use -v to get more diff"
    )
    line = one_line(message)
    assert "\n" not in line
    assert line.endswith("| At index 30 diff: ('r30', b'xxxxxxxx') != ('r30', b'xxxxxxxy')")
    assert one_line("assert 1 == 2\n  +1\n  -2") == "assert 1 == 2"
    assert len(one_line("x" * 2000)) == 480


def test_no_piece_of_a_secret_where_pytest_shortened_the_url() -> None:
    # pytest shortens long values in the middle ('memory://app...ter2-s3cret@x'); seen in
    # an assertion comparing the URL, run under pytest-xdist.
    scrub = Scrubber()
    scrub.add("memory://app:Hunter2-s3cret@x")
    shown = scrub("assert 'memory://app...ter2-s3cret@x' == 'memory://app:Hunter2-s...'")
    assert shown == "assert 'memory://app...***@x' == 'memory://app:***...'"
    assert scrub("Hunter2 and s3cret alone are other words") == (
        "Hunter2 and s3cret alone are other words"
    )
