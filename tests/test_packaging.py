"""Every member builds a wheel that shares the ``chatkeep`` namespace (PEP 420)."""

from __future__ import annotations

import re
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MEMBERS = sorted(
    path.parent
    for pattern in ("core/pyproject.toml", "plugins/*/pyproject.toml", "packages/*/pyproject.toml")
    for path in ROOT.glob(pattern)
)


def test_no_namespace_init_in_any_member() -> None:
    offenders = [str(p) for p in ROOT.glob("*/**/src/chatkeep/__init__.py")]
    offenders += [str(p) for p in ROOT.glob("core/src/chatkeep/__init__.py")]
    assert offenders == []


def test_every_member_has_readme_tests_and_py_typed() -> None:
    assert MEMBERS, "no members found"
    for member in MEMBERS:
        assert (member / "README.md").stat().st_size > 200, f"{member.name}: README too thin"
        assert list((member / "tests").glob("test_*.py")), f"{member.name}: no tests"
        modules = [p for p in (member / "src" / "chatkeep").iterdir() if p.is_dir()]
        assert len(modules) == 1, f"{member.name}: expected one module under src/chatkeep"
        assert (modules[0] / "py.typed").exists(), f"{member.name}: no py.typed"


@pytest.mark.slow
def test_wheels_share_the_namespace(tmp_path: Path) -> None:
    uv = shutil.which("uv")
    if uv is None:
        pytest.fail("uv is needed to build wheels (it is installed by ./run)")
    for member in MEMBERS:
        text = (member / "pyproject.toml").read_text()
        match = re.search(r'^name = "([^"]+)"', text, re.MULTILINE)
        assert match, member
        name = match.group(1)
        subprocess.run(
            [uv, "build", "--wheel", "--package", name, "--out-dir", str(tmp_path), "-q"],
            cwd=ROOT,
            check=True,
        )
        wheel = next(tmp_path.glob(f"{name.replace('-', '_')}-*.whl"))
        names = zipfile.ZipFile(wheel).namelist()
        assert "chatkeep/__init__.py" not in names, f"{wheel.name} owns the namespace"
        module = name.removeprefix("chatkeep-").replace("-", "_")
        assert f"chatkeep/{module}/__init__.py" in names, f"{wheel.name}: {names[:10]}"
        assert f"chatkeep/{module}/py.typed" in names
