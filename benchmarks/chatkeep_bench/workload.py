"""What one chat turn is, the messages it writes, and the run's settings.

A *turn* is what an agent does around one model call: load the last ``WINDOW`` (50)
messages of a session, then append one exchange (a user message and the assistant's
reply, two records of about 300 bytes each). Every variant of every backend does exactly
that; only the code that does it differs.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from typing import Any

from chatkeep.core import Message, Record, TextContent, encode_message, new_id

__all__ = [
    "TEXT_LENGTH",
    "WINDOW",
    "Settings",
    "message",
    "message_dict",
    "payload",
    "record",
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


def message(role: str, number: int, message_id: str | None = None) -> Message:
    """A chatkeep :class:`Message` with one text content."""
    return Message(role, [TextContent(text(number))], message_id=message_id)


@functools.lru_cache(maxsize=512)
def payload(role: str, number: int) -> bytes:
    """chatkeep's stored bytes of a message without an id (a reader takes the record's id
    as the message id); cached, so that record-level turns time storage, not encoding."""
    return encode_message(message(role, number))


def record(role: str, number: int) -> Record:
    """A record of a message (fresh id, ~300 bytes), as a record-level turn appends."""
    return Record(new_id(), payload(role, number % 128))


def message_dict(role: str, number: int, message_id: str) -> dict[str, Any]:
    """The same message as a plain dict, in the JSON shape chatkeep (and MAF) store."""
    return {
        "type": "message",
        "role": role,
        "contents": [{"type": "text", "text": text(number)}],
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
