"""The deterministic "model" behind the fake server, shared by every protocol.

Each protocol module turns its request into a list of :class:`Turn` (the *effective
history*: what a real model would be shown, server-side state included) and asks
:func:`reply` for the answer. Because every protocol reduces to the same turns, the same
conversation gives the same reply whichever API carried it.

Turns are canonical, so that one chatkeep message is one turn whatever the wire format:
an assistant's text and tool calls form one turn even where they travel as separate items
(Responses), the results of one round of tools form one ``tool`` turn even where they are
separate messages (Chat Completions, Responses) or blocks of a user message (Anthropic).
Separate user messages stay separate turns. For such a history the reply is exactly
:class:`chatkeep.core.OfflineChatClient`'s.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

__all__ = [
    "Call",
    "ModelReply",
    "Result",
    "Turn",
    "canonical_turns",
    "parse_tool_requests",
    "reply",
    "sign_thinking",
]


@dataclass
class Call:
    """A tool call: ``arguments`` is the JSON text the wire format carries."""

    call_id: str
    name: str
    arguments: str


@dataclass
class Result:
    """A tool result; ``output`` is the text sent back (JSON-encoded when it was not text)."""

    call_id: str
    output: str


@dataclass
class Turn:
    """One canonical message of the effective history."""

    role: str  # "system", "user", "assistant" or "tool"
    texts: list[str] = field(default_factory=list)
    calls: list[Call] = field(default_factory=list)
    results: list[Result] = field(default_factory=list)
    #: This piece continues the previous turn when that turn has the same role.
    joins: bool = False

    @property
    def text(self) -> str:
        """The turn's texts joined as :attr:`chatkeep.core.Message.text` joins contents."""
        return "".join(self.texts)


@dataclass
class ModelReply:
    """What the model answers: text, tool calls, or both; ``thinking`` when asked for."""

    text: str | None
    calls: list[Call] = field(default_factory=list)
    thinking: str | None = None


def canonical_turns(turns: Iterable[Turn]) -> list[Turn]:
    """Join pieces marked ``joins`` to the previous turn of their role; drop empty turns."""
    merged: list[Turn] = []
    for turn in turns:
        if not (turn.texts or turn.calls or turn.results):
            continue
        if turn.joins and merged and merged[-1].role == turn.role:
            last = merged[-1]
            last.texts.extend(turn.texts)
            last.calls.extend(turn.calls)
            last.results.extend(turn.results)
        else:
            merged.append(Turn(turn.role, list(turn.texts), list(turn.calls), list(turn.results)))
    return merged


_CALL = re.compile(r"call:([A-Za-z_][A-Za-z0-9_.\-]*)\(")


def parse_tool_requests(text: str) -> list[tuple[str, str]]:
    """The ``call:<tool>(<json object>)`` requests in ``text`` as (name, JSON arguments).

    ``call:clock()`` has no arguments (``"{}"``); arguments that are not a JSON object
    make the request be ignored (the model then answers with text).
    """
    found: list[tuple[str, str]] = []
    decoder = json.JSONDecoder()
    for match in _CALL.finditer(text):
        rest = text[match.end() :].lstrip()
        if rest.startswith(")"):
            found.append((match.group(1), "{}"))
            continue
        try:
            arguments, end = decoder.raw_decode(rest)
        except ValueError:
            continue
        if isinstance(arguments, dict) and rest[end:].lstrip().startswith(")"):
            found.append((match.group(1), json.dumps(arguments, separators=(",", ":"))))
    return found


def reply(
    turns: Sequence[Turn],
    *,
    tool_names: Iterable[str] = (),
    new_call_id: object = None,
    thinking: bool = False,
) -> ModelReply:
    """The model's answer to ``turns`` (already canonical).

    * Text: ``[seen N] first: '<first user text>' | latest: '<latest user text>'`` where N
      counts the non-system turns; after a round of tools it adds
      ``| tool results: '<output>', ...``.
    * Tool calls: when the last turn is the user's and its text holds
      ``call:<tool>(<json args>)`` requests for tools offered in ``tool_names``, the reply
      is those calls (ids from ``new_call_id()``); a request for a tool that was not offered
      adds ``| tool not offered: '<name>'`` to the text instead.
    * ``thinking=True`` adds a short thinking text (Anthropic extended thinking).
    """
    seen = [t for t in turns if t.role != "system"]
    users = [t.text for t in seen if t.role == "user"]
    first = users[0] if users else ""
    latest = users[-1] if users else ""
    text = f"[seen {len(seen)}] first: {first!r} | latest: {latest!r}"
    thought = f"I was shown {len(seen)} turns." if thinking else None
    if seen and seen[-1].role == "tool":
        outputs = ", ".join(repr(r.output) for r in seen[-1].results)
        return ModelReply(f"{text} | tool results: {outputs}", thinking=thought)
    if seen and seen[-1].role == "user":
        offered = set(tool_names)
        calls: list[Call] = []
        missing: list[str] = []
        for name, arguments in parse_tool_requests(latest):
            if name in offered and callable(new_call_id):
                calls.append(Call(str(new_call_id()), name, arguments))
            else:
                missing.append(name)
        if calls:
            return ModelReply(None, calls, thinking=thought)
        if missing:
            text += " | tool not offered: " + ", ".join(repr(n) for n in missing)
    return ModelReply(text, thinking=thought)


def sign_thinking(secret: bytes, thinking: str) -> str:
    """The signature the fake server gives a thinking text (checked when it comes back)."""
    return "sig_" + hashlib.sha256(secret + thinking.encode("utf-8")).hexdigest()[:32]
