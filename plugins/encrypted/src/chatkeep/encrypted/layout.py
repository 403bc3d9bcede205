"""What an encrypted record looks like, and how it is sealed and opened.

A record's data is replaced by an envelope (its id stays as it is, so the inner store can
keep retries idempotent)::

    b"CKE1" | key id length: 1 byte | key id (ASCII) | nonce: 12 bytes | ciphertext + tag

(the ciphertext is AES-256-GCM's, its 16-byte tag appended). The additional authenticated
data binds the envelope to where it belongs: the format, the key id, the session id and the
record id. A record copied into another session or under another id, or changed in any
byte, fails to open.

Sealing is deterministic: the nonce is an HMAC-SHA256 (under a key of its own, derived from
the master key) of the authenticated data and the plaintext, truncated to 96 bits (the
SIV construction). So the same record sealed twice gives the same bytes, which is what lets
an exact retry of a batch stay a no-op in the inner store, while two different plaintexts
never share a nonce (short of an HMAC collision).
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from .config import Keyring

__all__ = ["MAGIC", "Cipher", "Opened", "Sealing"]

#: The first bytes of every encrypted record (format 1).
MAGIC = b"CKE1"
_NONCE = 12


def _derive(master: bytes, purpose: bytes) -> bytes:
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=purpose).derive(master)


@dataclass(frozen=True)
class Sealing:
    """The working keys derived from one master key (never shown)."""

    key_id: bytes
    aead: AESGCM
    nonce_key: bytes

    def __repr__(self) -> str:
        return f"Sealing(key_id={self.key_id.decode()!r})"


@dataclass(frozen=True)
class Opened:
    """A record's plaintext and the id of the key that sealed it."""

    data: bytes
    key_id: str


class Cipher:
    """Seals and opens record data for one keyring."""

    __slots__ = ("_sealings", "primary")

    def __init__(self, keyring: Keyring) -> None:
        self._sealings = {
            key_id: Sealing(
                key_id.encode(),
                AESGCM(_derive(master, b"chatkeep.encrypted/1 records")),
                _derive(master, b"chatkeep.encrypted/1 nonces"),
            )
            for key_id, master in keyring.keys.items()
        }
        self.primary = keyring.primary

    @property
    def key_ids(self) -> frozenset[str]:
        """The ids of the keys this cipher opens."""
        return frozenset(self._sealings)

    def __repr__(self) -> str:
        return f"<Cipher primary={self.primary!r} keys={sorted(self._sealings)!r}>"

    def _aad(self, key_id: bytes, session_id: str, record_id: str) -> bytes:
        return b"\x00".join((MAGIC, key_id, session_id.encode(), record_id.encode()))

    def seal(self, session_id: str, record_id: str, data: bytes) -> bytes:
        """The envelope of ``data`` for record ``record_id`` of ``session_id``."""
        sealing = self._sealings[self.primary]
        aad = self._aad(sealing.key_id, session_id, record_id)
        nonce = hmac.new(sealing.nonce_key, aad + b"\x00" + data, hashlib.sha256).digest()
        nonce = nonce[:_NONCE]
        return (
            MAGIC
            + bytes([len(sealing.key_id)])
            + sealing.key_id
            + nonce
            + sealing.aead.encrypt(nonce, data, aad)
        )

    def open(self, session_id: str, record_id: str, envelope: bytes) -> Opened:
        """The plaintext of an envelope; ``ValueError`` says why it cannot be opened."""
        if not envelope.startswith(MAGIC) or len(envelope) < len(MAGIC) + 1:
            raise ValueError("the record is not encrypted (or not in a format this reads)")
        size = envelope[len(MAGIC)]
        start = len(MAGIC) + 1
        key_id = envelope[start : start + size]
        nonce = envelope[start + size : start + size + _NONCE]
        body = envelope[start + size + _NONCE :]
        try:
            name = key_id.decode("ascii")
        except UnicodeDecodeError:
            raise ValueError("the record's key id is not ASCII: it is damaged") from None
        sealing = self._sealings.get(name)
        if sealing is None:
            raise ValueError(
                f"the record was encrypted with key id {name!r}, which is not configured "
                f"(configured: {', '.join(sorted(self._sealings))})"
            )
        if len(nonce) != _NONCE or len(body) < 16:
            raise ValueError("the record is truncated")
        try:
            data = sealing.aead.decrypt(nonce, body, self._aad(key_id, session_id, record_id))
        except InvalidTag:
            raise ValueError(
                "the record does not authenticate: it was changed, or moved from another "
                "session or record"
            ) from None
        return Opened(data, name)

    def key_id_of(self, envelope: bytes) -> str | None:
        """The key id an envelope names (``None`` for data that is not an envelope)."""
        if not envelope.startswith(MAGIC) or len(envelope) < len(MAGIC) + 1:
            return None
        size = envelope[len(MAGIC)]
        raw = envelope[len(MAGIC) + 1 : len(MAGIC) + 1 + size]
        try:
            return raw.decode("ascii")
        except UnicodeDecodeError:
            return None
