"""The chatkeep namespace folder never stays on sys.path (pytest's prepend import mode)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from chatkeep.testing._paths import clean_sys_path, is_namespace_portion


def _site(tmp_path: Path) -> Path:
    # site-packages/chatkeep/{redis,testing}/__init__.py, as after `pip install`
    for member in ("redis", "testing"):
        package = tmp_path / "chatkeep" / member
        package.mkdir(parents=True)
        (package / "__init__.py").write_text("SHADOW = True\n")
    return tmp_path / "chatkeep"


def test_the_namespace_folder_is_recognised(tmp_path: Path) -> None:
    folder = _site(tmp_path)
    assert is_namespace_portion(str(folder))
    assert not is_namespace_portion(str(tmp_path))
    assert not is_namespace_portion(str(folder / "redis"))
    regular = tmp_path / "other" / "chatkeep"
    regular.mkdir(parents=True)
    (regular / "__init__.py").write_text("")
    assert not is_namespace_portion(str(regular)), "a regular package named chatkeep"


def test_clean_sys_path_removes_it_and_forgets_shadowed_modules(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = _site(tmp_path)
    monkeypatch.setattr(sys, "path", [str(folder), *sys.path])
    monkeypatch.delitem(sys.modules, "chatkeep_shadow_probe", raising=False)
    (folder / "chatkeep_shadow_probe.py").write_text("")
    import chatkeep_shadow_probe  # type: ignore[import-not-found]  # noqa: F401

    assert "chatkeep_shadow_probe" in sys.modules
    assert clean_sys_path() == [str(folder)]
    assert str(folder) not in sys.path
    assert "chatkeep_shadow_probe" not in sys.modules
    assert clean_sys_path() == []
