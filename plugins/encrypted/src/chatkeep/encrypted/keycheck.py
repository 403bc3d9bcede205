"""Checking, before a write, that this handle's keys open what the store already holds.

A handle configured with another key (or another key under the same id) would otherwise
append records nobody else can read, and the rightful key holders' loads of that session
would fail from then on. So before the first write to a session, the wrapper opens the
session's last record (one tail read); before the first write of a handle to an empty
session, the last record of the store's newest session (one listing page and one tail
read). A session this handle has read or written is not checked again. The cost is bounded
(at most two reads per session, once) and nothing is stored when the check fails.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from chatkeep.core.backend import Record

from .errors import KeyMismatch
from .layout import MAGIC, Cipher

__all__ = ["KeyCheck"]

#: How many sessions a handle remembers as checked (the oldest is forgotten first).
REMEMBERED = 4096


class KeyCheck:
    """Which sessions this handle's keys are known to open, and the check itself."""

    def __init__(self, cipher: Cipher) -> None:
        self.cipher = cipher
        self.store_checked = False
        self._known: OrderedDict[str, None] = OrderedDict()
        self._lock = threading.Lock()

    def needed(self, session_id: str) -> bool:
        """Whether a write to ``session_id`` must be checked first."""
        with self._lock:
            return session_id not in self._known

    def known(self, session_id: str) -> None:
        """Remember that this handle's keys open ``session_id`` (it read or wrote it)."""
        with self._lock:
            self._known[session_id] = None
            self._known.move_to_end(session_id)
            while len(self._known) > REMEMBERED:
                self._known.popitem(last=False)

    def check(self, session_id: str, checked: str, tail: list[Record]) -> bool:
        """Raise :class:`KeyMismatch` if the last record of ``checked`` (``tail``, a read
        of ``-1``) does not open with this handle's keys; ``False`` for an empty log."""
        if not tail:
            return False
        record = tail[-1]
        if record.data.startswith(MAGIC):  # plaintext (allow_plaintext) proves nothing
            try:
                self.cipher.open(checked, record.id, record.data)
            except ValueError:
                raise KeyMismatch(session_id, checked, _reason(self.cipher, record)) from None
        return True


def _reason(cipher: Cipher, record: Record) -> str:
    key_id = cipher.key_id_of(record.data)
    if key_id is not None and key_id not in cipher.key_ids:
        return f"it was sealed with key id {key_id!r}, which is not configured here"
    return (
        f"it was sealed with key id {key_id!r} and does not authenticate with this handle's "
        "key of that id: another key under the same id, or a damaged record"
    )
