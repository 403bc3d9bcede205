"""Context providers: add messages, instructions or tools to a run, and see its outcome.

A :class:`ContextProvider` is called before each model call (``invoking``) and after it
(``invoked``), like a history provider. The messages it adds are tagged
``CONTEXT_PROVIDER`` with its ``source_id``; a :class:`~chatkeep.core.history.HistoryProvider`
stores them only when created with ``store_context_messages=True``. Like history
providers, context providers keep per-session data in the session's state bag, never in
their own fields::

    class UserFacts(ContextProvider):
        source_id = "user-facts"

        async def invoking(self, session, messages):
            name = session.state.try_get("user-name", str)
            return Context(instructions=f"The user is called {name}.") if name else None
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from .messages import Message
from .session import AgentSession
from .tools import Tool

__all__ = ["Context", "ContextProvider"]


@dataclass
class Context:
    """What a context provider adds to one run: ``messages`` (placed after the history,
    before the request), ``instructions`` (appended to the agent's) and ``tools``."""

    messages: list[Message] = field(default_factory=list)
    instructions: str | None = None
    tools: list[Tool] = field(default_factory=list)


class ContextProvider:
    """Base class of context providers; override :meth:`invoking` and/or :meth:`invoked`.

    ``source_id`` names the provider in the tags of the messages it adds.
    """

    source_id: str = "context"

    async def invoking(self, session: AgentSession, messages: Sequence[Message]) -> Context | None:
        """Called before the model call with the run's request messages; return what to
        add (or ``None`` for nothing)."""
        return None

    async def invoked(
        self,
        session: AgentSession,
        request_messages: Sequence[Message],
        response_messages: Sequence[Message] = (),
        *,
        error: BaseException | None = None,
    ) -> None:
        """Called after the run: the request, the response (tool calls and results
        included) and the error when the run failed."""
        return None

    def __repr__(self) -> str:
        return f"{type(self).__name__}(source_id={self.source_id!r})"
