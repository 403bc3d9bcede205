"""core/BACKENDS.md stays true: its complete backend is the one the tests install and run
the suite against, and the READMEs link to it."""

from __future__ import annotations

import re
from pathlib import Path

import tomllib

REPO = Path(__file__).resolve().parents[1]
PAGE = REPO / "core" / "BACKENDS.md"
FIXTURE = REPO / "tests" / "third_party_fixture"


def _blocks(language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```$", PAGE.read_text(), re.M | re.S)


def test_the_complete_backend_is_the_tested_fixture() -> None:
    complete = [block for block in _blocks("python") if "class TPStore" in block]
    assert complete == [(FIXTURE / "tpstore.py").read_text()]


def test_the_pyproject_matches_the_fixture() -> None:
    (block,) = [b for b in _blocks("toml") if "entry-points" in b]
    shown = tomllib.loads(block)["project"]
    real = tomllib.loads((FIXTURE / "pyproject.toml").read_text())["project"]
    assert shown["entry-points"] == real["entry-points"]
    assert shown["name"] == real["name"] and shown["dependencies"] == real["dependencies"]


def test_the_readmes_link_the_page() -> None:
    assert "core/BACKENDS.md" in (REPO / "README.md").read_text()
    assert "(BACKENDS.md)" in (REPO / "core" / "README.md").read_text()


def test_the_test_hooks_on_the_page_are_the_suites() -> None:
    from chatkeep.testing.hooks import TEST_HOOKS

    text = PAGE.read_text()
    assert all(f"`{hook}(" in text for hook in TEST_HOOKS)
