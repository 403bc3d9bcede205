"""The documented install gives the documented command: ``chatkeep-testing`` has no
``chatkeep`` console script (the CLI has), so no page pairs the two."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
PAGES = ["README.md", "core/BACKENDS.md", "packages/testing/README.md"]


def test_chatkeep_testing_has_no_chatkeep_command() -> None:
    pyproject = (REPO / "packages/testing/pyproject.toml").read_text(encoding="utf-8")
    scripts = re.search(r"^\[project\.scripts\]\n(.*?)(?:^\[|\Z)", pyproject, re.M | re.S)
    assert scripts is None or not re.search(r"^chatkeep\s*=", scripts.group(1), re.M)


def test_no_page_says_installing_chatkeep_testing_gives_the_chatkeep_command() -> None:
    for page in PAGES:
        text = (REPO / page).read_text(encoding="utf-8")
        for block in re.findall(r"```(?:bash|console|sh)\n(.*?)```", text, re.S):
            installs = re.search(r"pip install chatkeep-testing\b(?!\[)", block)
            assert not (installs and "chatkeep conformance" in block), (page, block)
