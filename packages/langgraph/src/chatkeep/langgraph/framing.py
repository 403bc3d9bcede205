"""The bytes of each record the saver stores (msgpack maps; the store never parses them).

Values and checkpoints are serialized by the saver's LangGraph ``serde`` (``(type, bytes)``
pairs, as every LangGraph saver stores them); this module only frames those pairs with the
fields the saver needs to find them again.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import ormsgpack

from chatkeep.core.errors import CorruptRecord
from chatkeep.core.records import Record

__all__ = [
    "Blob",
    "Entry",
    "Stored",
    "Write",
    "decode",
    "encode_blob",
    "encode_checkpoint",
    "encode_namespace",
    "encode_write",
]

FORMAT = 1

#: Where a channel's value is: ``(version, position hint, record id)``; a record id of
#: ``None`` means "any blob of this channel at this version" (found by a search).
Entry = tuple[Any, int, "str | None"]


@dataclass(frozen=True)
class Blob:
    """One stored channel value."""

    record_id: str
    channel: str
    version: Any
    value: tuple[str, bytes]


@dataclass(frozen=True)
class Stored:
    """One stored checkpoint (its channel values are elsewhere, see ``entries``)."""

    record_id: str
    checkpoint_id: str
    position: int  #: where its writer believed it went (exact with conditional appends)
    parent_id: str | None
    thread_id: str
    checkpoint_ns: str
    run_id: str | None
    checkpoint: tuple[str, bytes]
    metadata: tuple[str, bytes]
    entries: dict[str, Entry]


@dataclass(frozen=True)
class Write:
    """One pending write."""

    record_id: str
    task_id: str
    idx: int
    channel: str
    value: tuple[str, bytes]
    task_path: str


def _pack(value: dict[str, Any]) -> bytes:
    return ormsgpack.packb(value)


def encode_blob(blob: Blob) -> Record:
    """The record of a channel value."""
    return Record(
        blob.record_id,
        _pack(
            {
                "k": "b",
                "c": blob.channel,
                "v": blob.version,
                "t": blob.value[0],
                "d": blob.value[1],
            }
        ),
    )


def encode_checkpoint(stored: Stored) -> Record:
    """The record of a checkpoint."""
    return Record(
        stored.record_id,
        _pack(
            {
                "k": "c",
                "f": FORMAT,
                "id": stored.checkpoint_id,
                "p": stored.position,
                "par": stored.parent_id,
                "th": stored.thread_id,
                "ns": stored.checkpoint_ns,
                "run": stored.run_id,
                "cp": list(stored.checkpoint),
                "md": list(stored.metadata),
                "e": {ch: list(entry) for ch, entry in stored.entries.items()},
            }
        ),
    )


def encode_write(write: Write) -> Record:
    """The record of a pending write."""
    return Record(
        write.record_id,
        _pack(
            {
                "k": "w",
                "task": write.task_id,
                "i": write.idx,
                "c": write.channel,
                "t": write.value[0],
                "d": write.value[1],
                "path": write.task_path,
            }
        ),
    )


def encode_namespace(record_id: str, checkpoint_ns: str) -> Record:
    """The thread-index record of a namespace."""
    return Record(record_id, _pack({"k": "n", "ns": checkpoint_ns}))


def decode(session_id: str, record: Record, position: int = -1) -> Blob | Stored | Write | str:
    """Decode a record (a namespace record decodes to its namespace).

    Raises :class:`CorruptRecord` (naming the session, the position when known and the
    record id) for anything that is not a record this saver wrote.
    """
    try:
        raw = ormsgpack.unpackb(record.data)
        kind = raw["k"]
        if kind == "b":
            return Blob(record.id, raw["c"], raw["v"], (raw["t"], raw["d"]))
        if kind == "c":
            if raw.get("f", FORMAT) > FORMAT:
                raise ValueError(f"written by a newer chatkeep-langgraph (format {raw['f']})")
            entries = {ch: (e[0], int(e[1]), e[2]) for ch, e in raw["e"].items()}
            return Stored(
                record_id=record.id,
                checkpoint_id=raw["id"],
                position=int(raw["p"]),
                parent_id=raw["par"],
                thread_id=raw["th"],
                checkpoint_ns=raw["ns"],
                run_id=raw["run"],
                checkpoint=(raw["cp"][0], raw["cp"][1]),
                metadata=(raw["md"][0], raw["md"][1]),
                entries=entries,
            )
        if kind == "w":
            return Write(
                record.id,
                raw["task"],
                int(raw["i"]),
                raw["c"],
                (raw["t"], raw["d"]),
                raw["path"],
            )
        if kind == "n":
            ns: str = raw["ns"]
            return ns
        raise ValueError(f"unknown record kind {kind!r}")
    except CorruptRecord:
        raise
    except (ormsgpack.MsgpackDecodeError, KeyError, TypeError, ValueError, IndexError) as exc:
        raise CorruptRecord(
            session_id, position, f"not a LangGraph checkpoint record: {exc}", record.id
        ) from None
