"""Ask pytest to rewrite the suite's ``assert`` statements into detailed messages."""

from __future__ import annotations

import sys

__all__ = ["register_assert_rewrite"]

_MODULES = ("chatkeep.testing.mixins", "chatkeep.testing.checks")


def register_assert_rewrite() -> None:
    """Register the suite's modules with pytest's assert rewriting, if not imported yet.

    Does nothing outside pytest (no rewrite hook can be active before pytest is imported,
    and worker processes should not pay for importing it). Modules already imported cannot
    be rewritten any more; skipping them avoids pytest's "already imported" warning on
    every nested run.
    """
    pytest = sys.modules.get("pytest")
    if pytest is None:
        return
    pending = [name for name in _MODULES if name not in sys.modules]
    if pending:
        pytest.register_assert_rewrite(*pending)
