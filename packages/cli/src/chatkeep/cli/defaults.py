"""The CLI's defaults, in a module that imports nothing (``chatkeep --help`` loads only
click and this, not the core)."""

from __future__ import annotations

__all__ = ["DEFAULT_HELP", "DEFAULT_URL"]

#: The one default store of every command, the demo included (the core's own default).
DEFAULT_URL = "sqlite:///chatkeep.db"
#: What ``--url``'s help says about the default.
DEFAULT_HELP = "$CHATKEEP_URL, else sqlite:///chatkeep.db in the current directory"
