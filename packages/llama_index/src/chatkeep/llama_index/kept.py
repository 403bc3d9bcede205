"""What a ``ChatkeepChatStore`` keeps of each conversation between calls, trusted only
after a tail read shows the log as it was left (DESIGN sections 5 and 9).

A chat memory reads the whole conversation every turn (``get_messages``) and adds the
turn's messages one call each (``add_message``). Decoding the conversation again every turn
is most of a turn's cost; :class:`KeptViews` holds, per key, the ``ChatMessage``\\ s decoded
last with the id of the log's last record then (the *anchor*) and the ids of the records
this object appended since, in order. A read checks the log's last ``1 + appended``
records: exactly the anchor then those ids, and the conversation is the kept messages plus
the ones added; anything else (another handle's append, an edit, an undo, a delete and a
new log under the key) and it is read again. Record ids are unique and the log only grows,
so an unchanged tail is an unchanged log.

Bounded: a conversation is kept while its records hold at most ``max_bytes`` bytes, and at
most ``max_keys`` conversations are kept (the least recently used go first).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from llama_index.core.llms import ChatMessage

from chatkeep.core import Record
from chatkeep.core.views import Spliced

__all__ = ["DEFAULT_KEYS", "DEFAULT_MAX_BYTES", "KeptViews", "fresh"]

#: The most record bytes of one kept conversation (about 25,000 messages of ~300 bytes).
DEFAULT_MAX_BYTES = 8 * 1024 * 1024
#: The most conversations kept at once.
DEFAULT_KEYS = 256


def fresh(message: ChatMessage) -> ChatMessage:
    """A copy of ``message`` with its own blocks and its own ``additional_kwargs`` dict, so
    what a caller sets on it or on them (LlamaIndex's ``Memory`` tags messages with
    ``additional_kwargs["session_id"]``) stays out of what is kept. Values nested deeper are
    shared (a full deep copy would cost more than decoding the record again)."""
    return message.model_copy(
        update={
            "blocks": [block.model_copy() for block in message.blocks],
            "additional_kwargs": dict(message.additional_kwargs),
        }
    )


@dataclass
class _Kept:
    messages: list[ChatMessage]
    anchor: str | None  # the log's last record when ``messages`` were read (None: empty)
    nbytes: int
    appended: list[str] = field(default_factory=list)  # ids appended since, in order


class KeptViews:
    """Per key: the conversation as last read or written by this object (thread-safe)."""

    def __init__(self, max_bytes: int = DEFAULT_MAX_BYTES, max_keys: int = DEFAULT_KEYS) -> None:
        self.max_bytes = max_bytes
        self.max_keys = max_keys
        self._items: OrderedDict[str, _Kept] = OrderedDict()
        self._lock = threading.Lock()

    def span(self, key: str) -> int:
        """How many of the log's newest records :meth:`messages` needs (0: nothing kept)."""
        with self._lock:
            kept = self._items.get(key)
            return 0 if kept is None else 1 + len(kept.appended)

    def messages(self, key: str, tail: Sequence[Record]) -> list[ChatMessage] | None:
        """Copies of the kept messages of ``key`` when ``tail`` (the log's last
        :meth:`span` records) is the log they were kept at; else ``None`` (and ``key`` is
        forgotten: read the conversation and :meth:`keep` it)."""
        with self._lock:
            kept = self._checked(key, tail)
            if kept is None:
                return None
            messages = kept.messages
        return [fresh(message) for message in messages]

    def current(
        self, key: str, tail: Sequence[Record]
    ) -> tuple[str | None, list[ChatMessage]] | None:
        """When ``tail`` (the log's last :meth:`span` records) is the log the kept
        messages of ``key`` were kept at: the log's newest record id and the kept messages
        (a new list of the kept objects: read them, do not change them), for an edit
        computed on them (:func:`chatkeep.core.views.edit_splice_known`); else ``None``
        (``key`` forgotten)."""
        with self._lock:
            kept = self._checked(key, tail)
            return None if kept is None else (kept.anchor, list(kept.messages))

    def _checked(self, key: str, tail: Sequence[Record]) -> _Kept | None:
        """What is kept of ``key`` when ``tail`` shows the log as it was kept (the appended
        ids folded in: the next check reads one record); else forget it. Holds the lock."""
        kept = self._items.get(key)
        if kept is None:
            return None
        expected = [kept.anchor, *kept.appended] if kept.anchor is not None else kept.appended
        if [record.id for record in tail] != expected or (
            kept.anchor is None and len(tail) != len(kept.appended)
        ):
            del self._items[key]
            return None
        self._items.move_to_end(key)
        if kept.appended:
            kept.anchor, kept.appended = kept.appended[-1], []
        return kept

    def proven(self, key: str) -> tuple[str | None, list[ChatMessage]] | None:
        """Like :meth:`current` without a read, when nothing was appended to ``key`` since
        its last check (the kept messages are the log up to the anchor): a write with
        ``AppendIf`` after the anchor is the check (it lands only if the log still ends
        there, and record ids are unique); else ``None``."""
        with self._lock:
            kept = self._items.get(key)
            if kept is None or kept.appended:
                return None
            self._items.move_to_end(key)
            return kept.anchor, list(kept.messages)

    def spliced(
        self, key: str, covers: str | None, done: Spliced, messages: list[ChatMessage]
    ) -> None:
        """This object wrote ``kept[done.first:done.last] = messages`` as one conditional
        record after ``covers``, making ``done.newest_record_id`` the log's last record:
        apply it to what is kept when that is still the log at ``covers``; otherwise
        forget ``key``."""
        with self._lock:
            kept = self._items.get(key)
            if kept is None:
                return
            if kept.appended or kept.anchor != covers:
                del self._items[key]
                return
            kept.messages[done.first : done.last] = messages
            kept.anchor = done.newest_record_id
            kept.nbytes += done.nbytes
            if kept.nbytes > self.max_bytes:
                del self._items[key]

    def keep(self, key: str, messages: list[ChatMessage], records: Sequence[Record] | None) -> None:
        """Keep ``messages``, read from the log ``records`` (all of it, oldest first; its
        last record is the anchor). ``records=None``: the caller does not know the log
        exactly, keep nothing."""
        if records is None:
            self.forget(key)
            return
        nbytes = sum(len(record.data) for record in records)
        anchor = records[-1].id if records else None
        self._put(key, _Kept([fresh(m) for m in messages], anchor, nbytes))

    def keep_read(
        self, key: str, messages: list[ChatMessage], anchor: str | None, nbytes: int
    ) -> None:
        """Keep ``messages``: the view of the log whose last record was ``anchor`` (read
        before and after the view, unchanged), from about ``nbytes`` bytes of records."""
        self._put(key, _Kept([fresh(m) for m in messages], anchor, nbytes))

    def appended(self, key: str, records: Sequence[Record], messages: list[ChatMessage]) -> None:
        """This object appended ``records`` (in one call), adding ``messages`` to the
        conversation (kept as they are: give the cache objects of its own)."""
        with self._lock:
            kept = self._items.get(key)
            if kept is None:
                return
            kept.nbytes += sum(len(record.data) for record in records)
            if kept.nbytes > self.max_bytes:
                del self._items[key]
                return
            kept.messages.extend(messages)  # decoded for the cache alone
            kept.appended.extend(record.id for record in records)

    def edited(
        self, key: str, tail: Sequence[Record], apply: Callable[[list[ChatMessage]], None]
    ) -> None:
        """This object just made an in-place edit of ``key`` that appended one record, and
        ``tail`` is the log's last :meth:`span` ``+ 1`` records: when they are exactly the
        kept log's end and then one more record (the edit, computed on the kept log: it is
        appended only right after the record it was computed from), ``apply`` the same
        edit to the kept messages; otherwise forget ``key``."""
        with self._lock:
            kept = self._items.get(key)
            if kept is None:
                return
            expected = [kept.anchor, *kept.appended] if kept.anchor is not None else kept.appended
            ids = [record.id for record in tail]
            if len(tail) != len(expected) + 1 or ids[:-1] != expected or ids[-1] in expected:
                del self._items[key]
                return
            try:
                apply(kept.messages)
            except (IndexError, ValueError):
                del self._items[key]
                return
            kept.anchor, kept.appended = ids[-1], []
            kept.nbytes += len(tail[-1].data)
            if kept.nbytes > self.max_bytes:
                del self._items[key]

    def forget(self, key: str) -> None:
        """Drop what is kept of ``key`` (an edit by this object: read it again)."""
        with self._lock:
            self._items.pop(key, None)

    def _put(self, key: str, kept: _Kept) -> None:
        with self._lock:
            self._items.pop(key, None)
            if kept.nbytes > self.max_bytes or self.max_keys <= 0:
                return
            self._items[key] = kept
            while len(self._items) > self.max_keys:
                self._items.popitem(last=False)
