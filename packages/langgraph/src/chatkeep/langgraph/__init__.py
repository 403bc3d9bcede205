"""chatkeep-langgraph: a LangGraph checkpointer (``BaseCheckpointSaver``) on every chatkeep
backend. See the package README for the record layout, its costs and LangGraph's
conformance report on each backend."""

from __future__ import annotations

from .errors import InvalidConfig
from .layout import DEFAULT_PREFIX
from .saver import ChatkeepSaver

__all__ = ["DEFAULT_PREFIX", "ChatkeepSaver", "InvalidConfig"]
