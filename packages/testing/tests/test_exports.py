"""chatkeep.testing's public names: one table, every name importable, nothing missing."""

from __future__ import annotations

import ast
from pathlib import Path

import chatkeep.testing as testing
from chatkeep.testing import mixins


def test_every_mixin_is_exported() -> None:
    exported = {name for name, module in testing._EXPORTS.items() if module == "mixins"}
    assert exported == set(mixins.__all__)


def test_every_export_is_importable_and_listed() -> None:
    assert sorted(testing.__all__) == sorted(testing._EXPORTS)
    for name in testing.__all__:
        assert getattr(testing, name) is not None, name


def test_the_type_checking_imports_match_the_table() -> None:
    tree = ast.parse(Path(testing.__file__).read_text())
    typed: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", "") == "TYPE_CHECKING":
            for statement in node.body:
                if isinstance(statement, ast.ImportFrom):
                    typed |= {alias.name for alias in statement.names}
    assert typed == set(testing._EXPORTS)
