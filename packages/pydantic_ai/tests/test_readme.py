"""Every Python block of the README runs as written (in a fresh folder, as a user would)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(), re.DOTALL)


def test_the_readme_has_examples() -> None:
    assert BLOCKS


@pytest.mark.parametrize("number", range(len(BLOCKS)))
def test_readme_block_runs(number: int, tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-W", "error::ResourceWarning", "-c", BLOCKS[number]],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip()  # every example prints what it shows
