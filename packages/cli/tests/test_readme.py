"""The READMEs' commands run as written, with the installed ``chatkeep`` on PATH, in a fresh
folder: every ``console`` block of this package's README prints what it shows (ids, times
and process numbers aside), every ``bash`` block runs, and so does the root README's block
of ``chatkeep`` commands."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parents[1]
README = (HERE / "README.md").read_text()
ROOT_README = (HERE.parents[1] / "README.md").read_text()
CONSOLE = re.findall(r"```console\n(.*?)```", README, re.DOTALL)
# Blocks that only install (what this environment already has) are left out.
BASH = [
    block
    for block in re.findall(r"```bash\n(.*?)```", README, re.DOTALL)
    if any(line and not line.startswith("pip install") for line in block.splitlines())
]
BIN = Path(sys.executable).parent

# What differs from run to run: ids (UUIDv7), times, process ids, the folder.
_VARYING = [
    (re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[0-9a-f]{4}-[0-9a-f]{12}\b"), "<id>"),
    (re.compile(r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(\.\d+)?(\+00:00)?"), "<time>"),
    (re.compile(r"process \d+"), "process <pid>"),
]


def _normal(text: str, folder: Path) -> list[str]:
    text = text.replace(str(folder), "/home/ada")
    for pattern, replacement in _VARYING:
        text = pattern.sub(replacement, text)
    return [line.rstrip() for line in text.strip("\n").splitlines()]


def _steps(block: str) -> list[tuple[str, list[str]]]:
    """``[(command, expected output lines), ...]`` of a console block."""
    steps: list[tuple[str, list[str]]] = []
    for line in block.rstrip("\n").splitlines():
        if line.startswith("$ "):
            steps.append((line[2:], []))
        else:
            steps[-1][1].append(line)
    return steps


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHATKEEP_")}
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONUNBUFFERED"] = "1"  # stdout and stderr in the order a terminal shows them
    return env


def test_the_readme_has_examples() -> None:
    assert len(CONSOLE) >= 4 and BASH


def test_console_blocks_print_what_they_show(tmp_path: Path) -> None:
    """The blocks run in order in one folder, as a reader following the page would."""
    for number, block in enumerate(CONSOLE):
        steps = _steps(block)
        marker = "@@@step"
        script = "".join(
            f"printf '\\n{marker} %s\\n' {i}\n{{ {command}\n}} 2>&1\n"
            for i, (command, _) in enumerate(steps)
        )
        done = subprocess.run(
            ["bash", "-c", script],
            cwd=tmp_path,
            env=_env(),
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        outputs = done.stdout.split(f"\n{marker} ")[1:]
        assert len(outputs) == len(steps), (number, done.stdout, done.stderr)
        for (command, expected), output in zip(steps, outputs, strict=True):
            shown = _normal(output.split("\n", 1)[1] if "\n" in output else "", tmp_path)
            want = _normal("\n".join(expected), tmp_path)
            assert shown == want, f"block {number}: $ {command}"


@pytest.mark.parametrize("block", [*BASH, "ROOT"])
def test_bash_blocks_run(block: str, tmp_path: Path) -> None:
    if block == "ROOT":
        (block,) = [b for b in re.findall(r"```bash\n(.*?)```", ROOT_README, re.DOTALL) if
                    "chatkeep sessions" in b]  # fmt: skip
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", block],
        cwd=tmp_path,
        env={**_env(), "SHELL": "/bin/bash"},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
