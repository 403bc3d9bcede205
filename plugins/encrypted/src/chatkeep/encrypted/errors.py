"""The one error type the encryption wrapper adds."""

from __future__ import annotations

from chatkeep.core.backend import CorruptRecord

__all__ = ["DecryptionError"]


class DecryptionError(CorruptRecord):
    """A record could not be decrypted: tampered with, moved from another session or
    record, encrypted with a key id that is not configured, or not encrypted at all.

    A :class:`~chatkeep.core.errors.CorruptRecord`: it names the session, the record's
    position and id, and the reason (a key id at most, never key material).
    """
