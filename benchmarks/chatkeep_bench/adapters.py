"""chatkeep's framework adapters, measured next to each framework's own store on the same
backend and the same turn (DESIGN section 9: "at least as fast").

- ``chatkeep ChatkeepSession (Agents SDK)``: ``chatkeep.openai_agents.ChatkeepSession``,
  the same turn as the SDK's sessions (``get_items(limit=50)`` + ``add_items``), one
  session object per conversation on one shared store.
- ``chatkeep ChatkeepChatMessageHistory (LangChain)``: ``history.messages[-50:]`` +
  ``add_messages``, the LangChain histories' turn (a full load, as theirs).
- ``... (LangChain, max_messages=50)``: the same with the adapter's window, which reads
  only the newest 50 records.

- ``MAF ChatkeepHistoryProvider (...)``: chatkeep-agent-framework's rows, beside MAF's own
  providers (see :mod:`.adapters_maf`).

Each backend module adds these rows with ``adapter_rows(url_for)``, ``url_for(tag)`` giving
a chatkeep URL no other row uses.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .adapters_maf import maf_rows
from .peers import AgentsSessions, LangChainHistories, optional
from .variants import AnyVariant, Unavailable

__all__ = ["adapter_rows"]

AGENTS = "chatkeep ChatkeepSession (Agents SDK)"
LANGCHAIN = "chatkeep ChatkeepChatMessageHistory (LangChain)"
LANGCHAIN_WINDOW = "chatkeep ChatkeepChatMessageHistory (LangChain, max_messages=50)"


def _agents(url: str) -> AnyVariant:
    from chatkeep.core import open_store
    from chatkeep.openai_agents import ChatkeepSession

    store = open_store(url)

    async def close() -> None:
        await store.aclose()

    variant = AgentsSessions(AGENTS, lambda sid: ChatkeepSession(sid, store=store), after=close)
    variant.kind = "chatkeep"
    return variant


def _langchain(url: str, name: str, window: int | None) -> AnyVariant:
    from chatkeep.core import open_store
    from chatkeep.langchain import ChatkeepChatMessageHistory

    store = open_store(url)
    make: Callable[[str], Any] = lambda sid: ChatkeepChatMessageHistory(  # noqa: E731
        sid, store=store, max_messages=window
    )
    variant = LangChainHistories(name, make, after=store.close)
    variant.kind = "chatkeep"
    return variant


def adapter_rows(url_for: Callable[[str], str]) -> list[AnyVariant | Unavailable]:
    """The adapter rows for one backend (a "not installed" row where an adapter is not)."""
    return [
        optional(AGENTS, ["agents", "chatkeep.openai_agents"], "chatkeep-openai-agents",
                 lambda: _agents(url_for("ad-agents"))),
        optional(LANGCHAIN, ["langchain_core", "chatkeep.langchain"], "chatkeep-langchain",
                 lambda: _langchain(url_for("ad-lc"), LANGCHAIN, None)),
        optional(LANGCHAIN_WINDOW, ["langchain_core", "chatkeep.langchain"], "chatkeep-langchain",
                 lambda: _langchain(url_for("ad-lcw"), LANGCHAIN_WINDOW, 50)),
        *maf_rows(url_for),
    ]  # fmt: skip
