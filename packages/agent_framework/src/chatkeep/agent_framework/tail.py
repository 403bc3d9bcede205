"""What the provider last saw at the end of each session, so a save need not read it.

MAF's providers decide what of a save is already stored (``filter_new_messages``) by
comparing it with the end of the stored history. The provider has just read that end in
``get_messages`` (MAF loads before every run and saves after it), so it remembers the last
:data:`KEPT` messages per session, in the form MAF's own stores keep them, and brings the
memory up to date with what it saves. A save that finds no memory of its session, or not
enough of it, reads the tail from the store instead.

The memory is a bounded cache in this process, never a source of truth: what another
process appends in between is not in it, which can only make a replay compare against
the end this process saw, the end the replayed transcript was read from.
"""

from __future__ import annotations

import copy
import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from agent_framework import Message as MafMessage

# MAF's own providers de-duplicate a save with this function; it is not exported from the
# package root, so it is imported from its module here, once (the tests check it is the
# one MAF's providers use).
from agent_framework._sessions import filter_new_messages

from chatkeep.core.metadata import RunningCount

__all__ = ["KEPT", "KnownTail", "TailMemory"]

#: Messages remembered per session (a save of more than this reads the store).
KEPT = 16
#: Sessions remembered per provider.
SESSIONS = 512


@dataclass(frozen=True)
class KnownTail:
    """The last messages of a session, oldest first, each as MAF's stores keep it (MAF's
    id, or none) with the chatkeep id it was handed out with when MAF gave none (a
    transcript read with ``get_messages`` carries those); ``whole``: this is the whole
    session; ``count``: the session's running count as the read proved it (``None``: not
    proved), for the mark the next save writes (see :mod:`chatkeep.core.metadata`)."""

    entries: tuple[tuple[MafMessage, str | None], ...]
    whole: bool
    count: RunningCount | None = None

    @classmethod
    def of(
        cls,
        pairs: Sequence[tuple[MafMessage, str | None]],
        *,
        whole: bool,
        count: RunningCount | None = None,
    ) -> KnownTail:
        """From ``(message as MAF sees it, the chatkeep id it was given or None)`` pairs,
        oldest first; ``whole``: they are the whole session; ``count``: its proved count."""
        return cls((), whole and len(pairs) <= KEPT, count).extended(pairs[-KEPT:])

    def covers(self, count: int) -> bool:
        """Whether the last ``count`` stored messages are all here (or the session has
        fewer and all of them are)."""
        return self.whole or len(self.entries) >= count

    def new_messages(self, incoming: list[MafMessage]) -> list[MafMessage]:
        """The suffix of ``incoming`` MAF's rule keeps as not stored yet.

        An incoming message that carries an id chatkeep assigned is compared by its
        contents, as the stored message MAF gave no id is.
        """
        if not self.entries:
            return list(incoming)
        assigned = {given for _, given in self.entries if given is not None}
        compared = [
            _stored_form(message, message.message_id) if message.message_id in assigned else message
            for message in incoming
        ]
        stored = [message for message, _ in self.entries[-len(incoming) :]]
        kept = len(filter_new_messages(stored, compared))  # always a suffix of its input
        return incoming[len(incoming) - kept :]

    def extended(
        self,
        saved: Iterable[tuple[MafMessage, str | None]],
        count: RunningCount | None = None,
    ) -> KnownTail:
        """This tail after ``saved`` (``(message, chatkeep id given or None)``) was
        appended: the last :data:`KEPT` of all; ``count``: the running count after them
        (``None``: keep this tail's own, for a tail being built)."""
        entries = (*self.entries, *((_stored_form(m, given), given) for m, given in saved))
        return KnownTail(entries[-KEPT:], self.whole and len(entries) <= KEPT, count or self.count)


def _stored_form(message: MafMessage, assigned: str | None) -> MafMessage:
    """``message`` as MAF's stores keep it: without the id chatkeep assigned (a copy)."""
    if assigned is None:
        return message
    copied = copy.copy(message)
    copied.message_id = None
    return copied


class TailMemory:
    """A bounded, thread-safe map from session id to its :class:`KnownTail`, with a
    version per entry so that a save racing another in this process forgets rather than
    remembers a tail that misses the other's messages."""

    def __init__(self, sessions: int = SESSIONS) -> None:
        self._limit = sessions
        self._lock = threading.Lock()
        self._tails: OrderedDict[str, tuple[KnownTail, int]] = OrderedDict()
        self._clock = 0

    def get(self, session_id: str) -> tuple[KnownTail | None, int]:
        """The remembered tail (or ``None``) and the version to hand back to :meth:`put`."""
        with self._lock:
            entry = self._tails.get(session_id)
            if entry is None:
                return None, -1
            self._tails.move_to_end(session_id)
            return entry

    def put(self, session_id: str, tail: KnownTail, *, version: int | None = None) -> None:
        """Remember ``tail``; with ``version``, only if the entry is still that version
        (``-1``: absent), else forget the session."""
        with self._lock:
            current = self._tails.get(session_id)
            if version is not None and (current[1] if current else -1) != version:
                self._tails.pop(session_id, None)
                return
            self._clock += 1
            self._tails[session_id] = (tail, self._clock)
            self._tails.move_to_end(session_id)
            while len(self._tails) > self._limit:
                self._tails.popitem(last=False)

    def forget(self, session_id: str) -> None:
        """Drop what is remembered of ``session_id``."""
        with self._lock:
            self._tails.pop(session_id, None)
