"""The error types the encryption wrapper adds."""

from __future__ import annotations

from chatkeep.core.backend import CorruptRecord
from chatkeep.core.errors import ChatkeepError

__all__ = ["DecryptionError", "KeyMismatch"]


class DecryptionError(CorruptRecord):
    """A record could not be decrypted: tampered with, moved from another session or
    record, encrypted with a key id that is not configured, or not encrypted at all.

    A :class:`~chatkeep.core.errors.CorruptRecord`: it names the session, the record's
    position and id, and the reason (a key id at most, never key material).
    """


class KeyMismatch(ChatkeepError):
    """A write was refused, before anything was stored, because this handle's keys cannot
    open what the store already holds (another key id, or another key under the same id):
    what it wrote would be unreadable for the store's rightful key holders.

    Names the session whose record was checked and the key ids, never key material.
    """

    def __init__(self, session_id: str, checked: str, reason: str) -> None:
        self.session_id = session_id
        self.checked = checked
        where = (
            f"session {session_id!r}"
            if checked == session_id
            else f"session {session_id!r} (checked against session {checked!r}, the store's newest)"
        )
        super().__init__(
            f"refusing to write to {where}: this handle's keys cannot open its last record "
            f"({reason}); nothing was stored. Open the store with the keys that wrote it."
        )
