"""Keep the inside of the ``chatkeep`` namespace off ``sys.path``.

pytest's default import mode (``prepend``) imports a package it collects by path from the
first directory above it without an ``__init__.py``. For ``chatkeep/testing`` that is the
``chatkeep`` namespace folder itself (``site-packages/chatkeep``), which pytest then puts
first on ``sys.path``. From there every member shadows a top-level module of the same name:
``import redis`` finds ``chatkeep/redis``, ``import openai`` finds ``chatkeep/openai``. The
suite's worker processes inherit ``sys.path`` (``spawn`` sends it along), so they break the
same way.

:func:`clean_sys_path` removes such entries (and forgets modules imported through them),
so the suite works in every import mode without a flag. It is called by the pytest plugin
and first thing in every worker process.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

__all__ = ["clean_sys_path", "is_namespace_portion"]

_NAMESPACE = "chatkeep"


def is_namespace_portion(entry: str) -> bool:
    """Whether ``entry`` (a ``sys.path`` item) is a folder of the ``chatkeep`` namespace
    package: named ``chatkeep``, without ``__init__.py``, holding member packages."""
    if not entry:
        return False
    try:
        path = Path(entry)
        if path.name != _NAMESPACE or not path.is_dir():
            return False
        if (path / "__init__.py").exists():
            return False
        return any((child / "__init__.py").is_file() for child in path.iterdir())
    except OSError:
        return False


def _module_file(module: object) -> str | None:
    file = getattr(module, "__file__", None)
    return file if isinstance(file, str) else None


def clean_sys_path() -> list[str]:
    """Remove ``chatkeep`` namespace folders from ``sys.path``; return what was removed.

    Top-level modules already imported from such a folder (``redis`` meaning
    ``chatkeep/redis``, ``testing`` meaning a second copy of ``chatkeep.testing``) are
    dropped from ``sys.modules`` so the next import finds the real one.
    """
    removed = [entry for entry in sys.path if is_namespace_portion(entry)]
    if not removed:
        return []
    sys.path[:] = [entry for entry in sys.path if entry not in removed]
    roots = [os.path.realpath(entry) + os.sep for entry in removed]
    for name, module in list(sys.modules.items()):
        if name.startswith(_NAMESPACE + ".") or name == _NAMESPACE:
            continue
        file = _module_file(module)
        if file and any(os.path.realpath(file).startswith(root) for root in roots):
            del sys.modules[name]
    return removed
