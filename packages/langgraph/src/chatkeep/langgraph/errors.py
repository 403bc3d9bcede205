"""Errors chatkeep-langgraph adds to :mod:`chatkeep.core.errors`."""

from __future__ import annotations

from chatkeep.core.errors import ChatkeepError

__all__ = ["InvalidConfig"]


class InvalidConfig(ChatkeepError, ValueError):
    """A LangGraph ``RunnableConfig`` lacks what the call needs (``thread_id``, or the
    ``checkpoint_id`` that ``put_writes`` attaches writes to)."""
