"""The capability lists in the READMEs are the ones the backends declare: each is checked
against ``chatkeep.core.backends()`` (the code), and a failure prints the line to paste."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from chatkeep.core import CAPABILITIES, backends

REPO = Path(__file__).resolve().parents[1]

#: The order the READMEs list capabilities in (every capability, once).
ORDER = (
    "delete",
    "list_sessions",
    "close",
    "ttl",
    "shared",
    "durable",
    "conditional",
    "namespace",
    "recent",
    "fulltext",
)

#: Root README row label -> backend name.
ROOT_ROWS = {"memory (built in)": "memory", "SQLite (the embedded default)": "sqlite"}
PLUGIN_READMES = {"sqlite": "sqlite", "redis": "redis", "postgres": "postgres", "s3": "s3"}


def declared(backend: str) -> list[str]:
    """What ``backend`` declares, in README order."""
    return [c for c in ORDER if c in backends()[backend].capabilities]


def test_the_order_names_every_capability() -> None:
    assert sorted(ORDER) == sorted(CAPABILITIES)


@pytest.mark.parametrize(("label", "backend"), sorted(ROOT_ROWS.items()))
def test_the_root_readme_backend_table(label: str, backend: str) -> None:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    (row,) = [line for line in text.splitlines() if line.startswith(f"| {label} |")]
    shown = [c.strip() for c in row.rstrip(" |").rsplit("|", 1)[1].split(",")]
    assert shown == declared(backend), f"README.md row {label!r} should end: " + ", ".join(
        declared(backend)
    )


@pytest.mark.parametrize("folder", sorted(PLUGIN_READMES))
def test_each_plugin_readme_lists_what_its_backend_declares(folder: str) -> None:
    text = (REPO / "plugins" / folder / "README.md").read_text(encoding="utf-8")
    match = re.search(r"^Capabilities: ((?:`\w+`,?\s*)+)", text, re.M)
    assert match, f"plugins/{folder}/README.md has no 'Capabilities:' line"
    shown = re.findall(r"`(\w+)`", match.group(1))
    expected = declared(PLUGIN_READMES[folder])
    assert shown == expected, f"plugins/{folder}/README.md should say: Capabilities: " + ", ".join(
        f"`{c}`" for c in expected
    )
