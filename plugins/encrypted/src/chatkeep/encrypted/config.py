"""Keys for the encryption wrapper: where they come from and how they are checked.

Keys are given as ``key_id:key`` pairs separated by commas, in ``CHATKEEP_ENCRYPTION_KEYS``
or the ``keys=`` option (which wins)::

    CHATKEEP_ENCRYPTION_KEYS="2026-12:q9R...=,2026-06:Zx8...="

Each key is 32 random bytes in URL-safe base64 (``Keyring.generate_key()`` makes one). The
**first** pair encrypts new records; every pair decrypts records written with its id, so
rotating is: put the new key first, keep the old ones after it until
:func:`chatkeep.encrypted.rotate` has re-encrypted the store.

Key material never appears in a repr, an error message or a log line: only key ids do.
"""

from __future__ import annotations

import base64
import binascii
import os
import re
import secrets
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from chatkeep.core.backend import InvalidOption

__all__ = ["ENVIRONMENT_VARIABLE", "Keyring", "parse_keys"]

#: Where keys are read from when no ``keys=`` option is given.
ENVIRONMENT_VARIABLE = "CHATKEEP_ENCRYPTION_KEYS"
_KEY_ID = re.compile(r"[A-Za-z0-9._-]{1,64}")


@dataclass(frozen=True)
class Keyring:
    """Named 32-byte keys; ``primary`` is the id that encrypts. Never shows key material."""

    primary: str
    keys: Mapping[str, bytes] = field(repr=False)

    def __post_init__(self) -> None:
        if self.primary not in self.keys:
            raise InvalidOption(f"the primary key id {self.primary!r} has no key")

    def __repr__(self) -> str:
        return f"Keyring(primary={self.primary!r}, key_ids={sorted(self.keys)!r})"

    @property
    def key_ids(self) -> tuple[str, ...]:
        """Every configured key id, the primary first."""
        return (self.primary, *(key_id for key_id in self.keys if key_id != self.primary))

    @staticmethod
    def generate_key() -> str:
        """A new random key, in the URL-safe base64 form ``keys=`` takes."""
        return base64.urlsafe_b64encode(secrets.token_bytes(32)).decode()

    @classmethod
    def from_option(cls, value: object = None) -> Keyring:
        """The keyring of a ``keys=`` value (a ``"id:key,id:key"`` str, a mapping of id to
        key, or a Keyring), else of ``CHATKEEP_ENCRYPTION_KEYS``."""
        if isinstance(value, Keyring):
            return value
        if value is None:
            text = os.environ.get(ENVIRONMENT_VARIABLE)
            if not text:
                raise InvalidOption(
                    f"no encryption keys: set {ENVIRONMENT_VARIABLE}='key_id:key' (a 32-byte "
                    "URL-safe base64 key; chatkeep.encrypted.Keyring.generate_key() makes one) "
                    "or pass keys='key_id:key'"
                )
            return parse_keys(text, source=ENVIRONMENT_VARIABLE)
        if isinstance(value, str):
            return parse_keys(value, source="the keys option")
        if isinstance(value, Mapping):
            return _keyring(list(value.items()), source="the keys option")
        raise InvalidOption(
            f"keys must be a 'key_id:key,...' str or a mapping, not {type(value).__name__}"
        )


def parse_keys(text: str, *, source: str = "keys") -> Keyring:
    """Parse ``"id:key,id:key"`` (the first pair encrypts)."""
    pairs: list[tuple[str, object]] = []
    for number, piece in enumerate(text.split(","), start=1):
        piece = piece.strip()
        if not piece:
            continue
        key_id, colon, key = piece.partition(":")
        if not colon:
            raise InvalidOption(f"entry {number} of {source} is not 'key_id:key'")
        pairs.append((key_id.strip(), key.strip()))
    return _keyring(pairs, source=source)


def _keyring(pairs: Iterable[tuple[object, object]], *, source: str) -> Keyring:
    keys: dict[str, bytes] = {}
    for key_id, key in pairs:
        if not isinstance(key_id, str) or not _KEY_ID.fullmatch(key_id):
            raise InvalidOption(
                f"invalid key id in {source}: ids are 1-64 of A-Z a-z 0-9 . _ - "
                f"(got {key_id!r:.70})"
            )
        if key_id in keys:
            raise InvalidOption(f"key id {key_id!r} appears twice in {source}")
        keys[key_id] = _key_bytes(key, key_id, source)
    if not keys:
        raise InvalidOption(f"{source} holds no keys")
    return Keyring(primary=next(iter(keys)), keys=keys)


def _key_bytes(key: object, key_id: str, source: str) -> bytes:
    if isinstance(key, bytes) and len(key) == 32:
        return key
    if not isinstance(key, str):
        raise InvalidOption(f"key {key_id!r} in {source} must be URL-safe base64 text")
    standard = key.replace("-", "+").replace("_", "/")
    try:
        raw = base64.b64decode(standard + "=" * (-len(standard) % 4), validate=True)
    except (binascii.Error, ValueError):
        # Never echo the value: it is (meant to be) a key.
        raise InvalidOption(f"key {key_id!r} in {source} is not URL-safe base64") from None
    if len(raw) != 32:
        raise InvalidOption(
            f"key {key_id!r} in {source} is {len(raw)} bytes; keys are 32 bytes (256 bits)"
        )
    return raw
