"""What one chat turn is, the messages it writes, and the run's settings.

A *turn* is what an agent does around one model call: load the last ``WINDOW`` (50)
messages of a session, then append one exchange (a user message and the assistant's
reply, two records of about 300 bytes each). Every fifth exchange is a tool call and its
result instead (issue 18): an assistant message with one function call and a tool message
with that call's result, ~300 bytes each. Histories are made of the same exchanges
(message ``n`` is message ``n % 2`` of exchange ``n // 2``). Every variant of every
backend does exactly that; only the code that does it differs.

A message is named by its *kind* (``user``, ``assistant``, ``call``, ``result``) and its
number; :func:`exchange` gives the kinds of exchange ``number``, :func:`kind_of` the kind of
history message ``n``.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from typing import Any

from chatkeep.core import (
    FunctionCallContent,
    FunctionResultContent,
    Message,
    Record,
    TextContent,
    encode_message,
    new_id,
)

__all__ = [
    "TEXT_LENGTH",
    "TOOL",
    "WINDOW",
    "Settings",
    "arguments",
    "call_id",
    "exchange",
    "kind_of",
    "message",
    "message_dict",
    "payload",
    "record",
    "role",
    "text",
]

#: Messages a turn loads.
WINDOW = 50
#: Characters of text per message: chatkeep's JSON form of such a message is ~300 bytes.
TEXT_LENGTH = 150

# A fixed pseudo-text, so that every library stores the same characters (no compression
# or encoding shortcut favours anyone) and runs are repeatable.
_WORDS = (
    "the quick brown fox jumps over a lazy dog while agents store their chat history "
    "in storage the user owns and every backend keeps one append only log per session "
)


def text(number: int) -> str:
    """The text of message ``number``: ``TEXT_LENGTH`` characters, varying with it."""
    shift = (number * 7) % len(_WORDS)
    rotated = (_WORDS[shift:] + _WORDS[:shift]) * 2
    return f"{number}: {rotated}"[:TEXT_LENGTH]


#: Characters of a tool result (its message is ~300 bytes, like a text message).
RESULT_LENGTH = 116
#: The tool every fifth exchange calls.
TOOL = "lookup_order"
#: Every ``TOOL_EVERY``-th exchange (numbers 4, 9, 14, ...) is a tool call and its result.
TOOL_EVERY = 5


def exchange(number: int) -> tuple[str, str]:
    """The kinds of the two messages of exchange ``number`` (a turn appends exchange
    ``number``): ``("call", "result")`` every fifth exchange, else ``("user", "assistant")``."""
    if number % TOOL_EVERY == TOOL_EVERY - 1:
        return ("call", "result")
    return ("user", "assistant")


def kind_of(number: int) -> str:
    """The kind of history message ``number``: message ``number % 2`` of exchange
    ``number // 2``."""
    return exchange(number // 2)[number % 2]


def role(kind: str) -> str:
    """The chat role of a message of ``kind`` (a call is the assistant's, a result the
    tool's)."""
    return {"call": "assistant", "result": "tool"}.get(kind, kind)


def call_id(number: int) -> str:
    """The id tying the call of message ``number`` to its result."""
    return f"call_{number:08d}"


def arguments(number: int) -> str:
    """The JSON arguments string of the call of message ``number`` (~150 characters, so
    that the stored message is about 300 bytes, as a text message)."""
    return json.dumps({"order": number, "note": text(number)[:64]}, separators=(",", ":"))


def message(kind: str, number: int, message_id: str | None = None) -> Message:
    """A chatkeep :class:`Message` of ``kind``: one text, one function call or one
    function result content."""
    if kind == "call":
        call = FunctionCallContent(call_id(number), TOOL, arguments(number))
        return Message("assistant", [call], message_id=message_id)
    if kind == "result":
        result = FunctionResultContent(call_id(number), text(number)[:RESULT_LENGTH])
        return Message("tool", [result], message_id=message_id)
    return Message(kind, [TextContent(text(number))], message_id=message_id)


@functools.lru_cache(maxsize=512)
def payload(kind: str, number: int) -> bytes:
    """chatkeep's stored bytes of a message without an id (a reader takes the record's id
    as the message id); cached, so that record-level turns time storage, not encoding."""
    return encode_message(message(kind, number))


def record(kind: str, number: int) -> Record:
    """A record of a message (fresh id, ~300 bytes), as a record-level turn appends."""
    return Record(new_id(), payload(kind, number % 128))


def message_dict(kind: str, number: int, message_id: str) -> dict[str, Any]:
    """The same message as a plain dict, in the JSON shape chatkeep (and MAF) store."""
    content: dict[str, Any]
    if kind == "call":
        content = {"type": "function_call", "call_id": call_id(number), "name": TOOL,
                   "arguments": arguments(number)}  # fmt: skip
    elif kind == "result":
        result = text(number)[:RESULT_LENGTH]
        content = {"type": "function_result", "call_id": call_id(number), "result": result}
    else:
        content = {"type": "text", "text": text(number)}
    return {
        "type": "message",
        "role": role(kind),
        "contents": [content],
        "message_id": message_id,
        "additional_properties": {},
    }


def encode_dict(value: dict[str, Any]) -> bytes:
    """Compact JSON bytes, the stdlib way a hand-written app would encode a message."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


@dataclass(frozen=True)
class Settings:
    """How long and how hard to measure (``quick()`` and ``full()`` are the two presets)."""

    quick: bool
    lengths: tuple[int, ...]
    turns: int  #: measured turns per variant and history length, at most
    warmup: int  #: unmeasured turns first (connections, prepared statements, caches)
    min_turns: int  #: a slow variant stops after this many once its time cap is spent
    variant_seconds: float  #: measured time cap per variant and history length
    record_budget: int  #: records per variant and length in its pool of sessions
    threads: int  #: concurrent sessions of the throughput run
    throughput_seconds: float  #: duration of each throughput run
    throughput_length: int  #: history length of the throughput sessions
    seed: int

    @classmethod
    def preset(cls, *, quick: bool, lengths: tuple[int, ...], threads: int, seed: int) -> Settings:
        """The quick (< 2 minutes for three backends) or the full (~10 minutes) preset."""
        if quick:
            return cls(
                quick=True,
                lengths=lengths,
                turns=40,
                warmup=4,
                min_turns=5,
                variant_seconds=0.5,
                record_budget=4_000,
                threads=threads,
                throughput_seconds=0.5,
                throughput_length=100,
                seed=seed,
            )
        return cls(
            quick=False,
            lengths=lengths,
            turns=400,
            warmup=20,
            min_turns=20,
            variant_seconds=5.0,
            record_budget=20_000,
            threads=threads,
            throughput_seconds=5.0,
            throughput_length=100,
            seed=seed,
        )
