"""``run_conformance`` from a script: an unguarded top-level call is refused with a clear
error (the suite's spawned workers would import the script again), a guarded one runs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from chatkeep.testing import UnguardedMain, run_conformance
from chatkeep.testing.runner import _is_main_guard

SELECT = '["-k", "test_unknown_session_is_not_found", "-p", "no:cacheprovider"]'


def _run(tmp_path: Path, body: str) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "check.py"
    script.write_text(body, encoding="utf-8")
    return subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=tmp_path,
    )


def test_an_unguarded_script_is_refused_before_anything_runs(tmp_path: Path) -> None:
    done = _run(
        tmp_path,
        "from chatkeep.testing import run_conformance\n"
        "print('top')\n"
        f"report = run_conformance('memory://', extra_args={SELECT}, quiet=True)\n"
        "print('ran')\n",
    )
    assert done.returncode != 0
    assert "UnguardedMain" in done.stderr and "line 3" in done.stderr, done.stderr
    assert '__name__ == "__main__"' in done.stderr
    assert "ran" not in done.stdout


def test_a_guarded_script_runs(tmp_path: Path) -> None:
    done = _run(
        tmp_path,
        "from chatkeep.testing import run_conformance\n"
        "if __name__ == '__main__':\n"
        f"    report = run_conformance('memory://', extra_args={SELECT}, quiet=True)\n"
        "    print('passed' if report.error is None else report.error)\n",
    )
    assert done.returncode == 0, done.stderr
    assert "passed" in done.stdout


def test_a_call_from_a_function_is_not_refused(tmp_path: Path) -> None:
    done = _run(
        tmp_path,
        "from chatkeep.testing import run_conformance\n"
        "def main():\n"
        f"    return run_conformance('memory://', extra_args={SELECT}, quiet=True)\n"
        "if __name__ == '__main__':\n"
        "    print('passed' if main().error is None else 'failed')\n",
    )
    assert done.returncode == 0, done.stderr
    assert "passed" in done.stdout


def test_a_worker_importing_the_script_stops(monkeypatch: pytest.MonkeyPatch) -> None:
    """What a spawned worker sees while it imports the main script."""
    import multiprocessing

    monkeypatch.setattr(multiprocessing.current_process(), "_inheriting", True, raising=False)
    with pytest.raises(UnguardedMain, match="worker"):
        run_conformance("memory://")


def test_the_guard_is_recognised_either_way_round() -> None:
    import ast

    for source, expected in (
        ("if __name__ == '__main__':\n    pass", True),
        ("if '__main__' == __name__:\n    pass", True),
        ("if __name__ != '__main__':\n    pass", False),
        ("if name == '__main__':\n    pass", False),
    ):
        assert _is_main_guard(ast.parse(source).body[0]) is expected, source
    assert issubclass(UnguardedMain, RuntimeError)
