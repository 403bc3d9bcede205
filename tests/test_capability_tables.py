"""The capability lists in the READMEs are the ones the backends declare: they are written
by ``tests/capability_tables.py`` from ``chatkeep.core.backends()`` (the code), and each is
checked against it; a failure prints the command that rewrites them."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from chatkeep.core import CAPABILITIES

GENERATOR = Path(__file__).with_name("capability_tables.py")


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("capability_tables", GENERATOR)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_tables = _generator()
ORDER, PLUGIN_READMES, REPO, ROOT_ROWS = (
    _tables.ORDER,
    _tables.PLUGIN_READMES,
    _tables.REPO,
    _tables.ROOT_ROWS,
)
declared, generated = _tables.declared, _tables.generated
render_plugin, render_root = _tables.render_plugin, _tables.render_root

REWRITE = "run: .venv/bin/python tests/capability_tables.py"


def test_the_order_names_every_capability() -> None:
    assert sorted(ORDER) == sorted(CAPABILITIES)


@pytest.mark.parametrize(("label", "backend"), sorted(ROOT_ROWS.items()))
def test_the_root_readme_backend_table(label: str, backend: str) -> None:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    (row,) = [line for line in text.splitlines() if line.startswith(f"| {label} |")]
    shown = [c.strip() for c in row.rstrip(" |").rsplit("|", 1)[1].split(",")]
    assert shown == declared(backend), f"README.md row {label!r} is stale ({REWRITE})"


@pytest.mark.parametrize("folder", sorted(PLUGIN_READMES))
def test_each_plugin_readme_lists_what_its_backend_declares(folder: str) -> None:
    text = (REPO / "plugins" / folder / "README.md").read_text(encoding="utf-8")
    match = re.search(r"^Capabilities: ((?:`\w+`,?\s*)+)", text, re.M)
    assert match, f"plugins/{folder}/README.md has no 'Capabilities:' line"
    shown = re.findall(r"`(\w+)`", match.group(1))
    assert shown == declared(PLUGIN_READMES[folder]), (
        f"plugins/{folder}/README.md's Capabilities line is stale ({REWRITE})"
    )


def test_the_readmes_are_what_the_generator_writes() -> None:
    stale = [
        path.relative_to(REPO).as_posix()
        for path, text in generated().items()
        if path.read_text(encoding="utf-8") != text
    ]
    assert not stale, f"{', '.join(stale)} differ from the generated lists ({REWRITE})"


def test_the_generator_rewrites_a_stale_row_and_line() -> None:
    table = (
        "| backend | capabilities |\n|---|---|\n"
        "| memory (built in) | delete, ttl |\n"
        "| SQLite (the embedded default) | close |\n"
    )
    rendered = render_root(table)
    assert f"| memory (built in) | {', '.join(declared('memory'))} |\n" in rendered
    assert f"| SQLite (the embedded default) | {', '.join(declared('sqlite'))} |\n" in rendered
    assert render_root(rendered) == rendered
    readme = "Intro.\n\nCapabilities: `delete`,\n`ttl` (and more prose).\n"
    written = render_plugin(readme, "redis")
    listed = ", ".join(f"`{name}`" for name in declared("redis"))
    assert written == f"Intro.\n\nCapabilities: {listed} (and more prose).\n"
    assert render_plugin(written, "redis") == written
    same_count = "Capabilities: `a`, `b`,\n" + ", ".join(["`x`"] * 7) + " (prose)\n"
    kept = render_plugin(same_count, "redis")  # redis declares nine: the breaks are kept
    assert kept.count("\n") == same_count.count("\n")
    assert re.findall(r"`(\w+)`", kept) == declared("redis")


def test_the_check_command_passes_on_the_repository() -> None:
    done = subprocess.run(
        [sys.executable, str(GENERATOR), "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
