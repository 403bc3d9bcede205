"""Every ``python`` block of this package's README runs as written (in a fresh process,
in an empty folder), and the three-line change shown as a diff is the one that works."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.DOTALL)


def test_the_readme_has_runnable_examples() -> None:
    assert BLOCKS, "no python block in the README"


@pytest.mark.parametrize("number", range(len(BLOCKS)))
def test_readme_block_runs(number: int, tmp_path: Path) -> None:
    script = tmp_path / f"block_{number}.py"
    script.write_text(BLOCKS[number])
    done = subprocess.run(
        [sys.executable, "-W", "error::RuntimeWarning", str(script)],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Traceback" not in done.stderr


def test_the_diff_is_the_change_the_runnable_example_makes() -> None:
    diff = re.search(r"```diff\n(.*?)```", README.read_text(), flags=re.DOTALL)
    assert diff is not None
    added = [line[1:].split("#")[0].strip() for line in diff.group(1).splitlines()
             if line.startswith("+")]  # fmt: skip
    assert len(added) == 3
    program = BLOCKS[-1]
    assert "from chatkeep.agent_framework import ChatkeepHistoryProvider" in program
    assert "context_providers=[history]" in program
    assert added[0] == "from chatkeep.agent_framework import ChatkeepHistoryProvider"
