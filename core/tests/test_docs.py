"""Documentation that cannot drift: every public name of chatkeep.core, of the backend kit
(chatkeep.core.backend) and of the views has a docstring, and so does every public method
of their classes; every hookspec documents each argument and its result pytest-style
(``:param name:`` / ``:returns:``)."""

from __future__ import annotations

import ast
import importlib
import inspect
import sys
from collections.abc import Iterator
from typing import Any, get_origin

import pytest

from chatkeep.core import hookspecs

#: The modules whose ``__all__`` is a public API.
PUBLIC = [
    "chatkeep.core",
    "chatkeep.core.backend",
    "chatkeep.core.chat",
    "chatkeep.core.programs",
    "chatkeep.core.views",
]


def public_names() -> Iterator[tuple[str, str, Any]]:
    for module_name in PUBLIC:
        module = importlib.import_module(module_name)
        for name in module.__all__:
            yield module_name, name, getattr(module, name)


#: Public names whose documentation belongs to another engineer's file, each with what to
#: add there; the test also fails once an entry is documented, so the list cannot rot.
PENDING: dict[str, str] = {
    # messages.py is the codec engineer's: a ``#:`` line above ``Content = (...)``.
    "chatkeep.core.Content": "issue 11",
}


def documented_constant(name: str, value: Any) -> bool:
    """A constant, type alias or marker counts as documented by a ``#:`` comment right
    above its assignment, or a string literal right after it (the Sphinx conventions), in
    the chatkeep.core module that assigns it."""
    for module_name, module in sorted(sys.modules.items()):
        if not module_name.startswith("chatkeep.core") or getattr(module, name, None) is not value:
            continue
        if assignment_documented(module_name, name):
            return True
    return False


def assignment_documented(module_name: str, name: str) -> bool:
    try:
        source = inspect.getsource(sys.modules[module_name])
    except (OSError, TypeError):
        return False
    lines = source.splitlines()
    tree = ast.parse(source)
    body = tree.body
    for index, node in enumerate(body):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = list(node.targets)
        elif isinstance(node, ast.AnnAssign):
            targets = [node.target]
        if not any(isinstance(t, ast.Name) and t.id == name for t in targets):
            continue
        above = lines[node.lineno - 2].strip() if node.lineno >= 2 else ""
        after = body[index + 1] if index + 1 < len(body) else None
        if above.startswith("#:"):
            return True
        if (
            isinstance(after, ast.Expr)
            and isinstance(after.value, ast.Constant)
            and isinstance(after.value.value, str)
        ):
            return True
    return False


def own_members(cls: type) -> Iterator[tuple[str, Any]]:
    """Public methods and properties a chatkeep class defines itself."""
    for name, member in vars(cls).items():
        if name.startswith("_"):
            continue
        if isinstance(member, (staticmethod, classmethod)):
            member = member.__func__
        if inspect.isfunction(member) or isinstance(member, property):
            yield name, member


def missing_docs() -> list[str]:
    missing: set[str] = set()
    for module_name, name, value in public_names():
        where = f"{module_name}.{name}"
        alias = get_origin(value) is not None  # Program[...], Literal[...]: constants
        if not alias and (inspect.isclass(value) or inspect.isfunction(value)):
            if not (inspect.getdoc(value) or "").strip():
                missing.add(where)
            if inspect.isclass(value) and value.__module__.startswith("chatkeep."):
                for member_name, member in own_members(value):
                    if not (member.__doc__ or "").strip():
                        missing.add(f"{value.__module__}.{value.__qualname__}.{member_name}")
        elif not documented_constant(name, value):
            missing.add(where)
    return sorted(missing)


def test_every_public_name_and_method_has_a_docstring() -> None:
    missing = missing_docs()
    assert [name for name in missing if name not in PENDING] == []
    documented = sorted(name for name in PENDING if name not in missing)
    assert documented == [], f"documented now, remove from PENDING: {documented}"


def test_the_check_notices_an_undocumented_name(monkeypatch: pytest.MonkeyPatch) -> None:
    import chatkeep.core

    def undocumented() -> None:
        pass

    monkeypatch.setattr(chatkeep.core, "undocumented", undocumented, raising=False)
    monkeypatch.setattr(chatkeep.core, "__all__", [*chatkeep.core.__all__, "undocumented"])
    assert "chatkeep.core.undocumented" in missing_docs()


def hookspec_functions() -> list[Any]:
    found = [
        value
        for value in vars(hookspecs).values()
        if inspect.isfunction(value) and hasattr(value, f"{hookspecs.PROJECT}_spec")
    ]
    assert found, "no hookspecs found"
    return found


@pytest.mark.parametrize("spec", hookspec_functions(), ids=lambda spec: spec.__name__)
def test_every_hookspec_documents_its_arguments_and_result(spec: Any) -> None:
    doc = inspect.getdoc(spec) or ""
    assert doc.strip(), f"{spec.__name__} has no docstring"
    for parameter in inspect.signature(spec).parameters:
        assert f":param {parameter}:" in doc, f"{spec.__name__}: :param {parameter}: missing"
    assert ":returns:" in doc, f"{spec.__name__}: :returns: missing"
