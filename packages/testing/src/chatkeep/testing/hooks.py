"""Optional test hooks: methods a backend may implement so the suite can check promises it
cannot check through the two storage hooks alone.

A backend object (what the factory returned; ``store.backend``) that has one of these
methods is checked with it; one that has not is reported ``not provided`` on that row of
the report, never ``pass``. They are for tests only: nothing in chatkeep calls them.

``chatkeep_damage(session_id, position, kind) -> None``
    Damage the record at absolute ``position`` of the session behind the store's back, as a
    disk, an operator or another program could: ``kind`` is ``"garbage"`` (its stored bytes
    replaced by others), ``"truncated"`` (cut short) or ``"missing"`` (removed). Raise
    ``NotImplementedError`` for a kind the backend cannot produce (that kind is then
    reported as not provided). The suite appends one record per ``append`` before it
    damages, so one record is one unit of storage on any layout. Expected afterwards
    (DESIGN section 10: reported, contained, never silent): reading the session through the
    views raises :class:`~chatkeep.core.errors.CorruptRecord` naming the session and
    ``position``; ``read(session, 0, position)`` returns the records before it unchanged;
    the session stays appendable (a new record reads back with a tail read) and the damage
    stays reported after that append.

``chatkeep_storage_contains(data) -> bool``
    Whether the bytes ``data`` occur anywhere in the storage this handle writes to: the
    database file with its journal or write-ahead log and free pages, every object or blob
    under the store's prefix, every key and value under its namespace. The suite writes
    records carrying a random marker, checks the hook finds it (so a hook that always says
    ``False`` fails), deletes the session and expects the marker gone: ``delete`` erases the
    bytes, not only the way to read them.

``chatkeep_durability() -> str``
    What an acknowledged ``append`` survives with this handle's settings: ``"nothing"``
    (it lives in the writing process), ``"process"`` (the writing process crashing),
    ``"server"`` (also the server or OS process holding the data restarting) or ``"power"``
    (also an OS crash or power loss: data is synced to stable storage before ``append``
    returns). The suite checks that a store declaring ``durable``
    claims ``"power"`` with its default settings (DESIGN section 10: backends default to
    the safe setting), and verifies the part it can: a record acknowledged by a process that
    then dies without closing anything is read back by another process.

``chatkeep_expiry(session_id) -> float | None``
    When the session expires, in seconds since the epoch by the store's clock (a server's
    clock may differ from the test's by minutes), or ``None`` when it never expires or does
    not exist. Read from storage, never from the handle's settings. The suite checks the
    ``ttl`` rules with it, with no sleeping: an exact retry that stores nothing sets the
    expiry from the retrying handle's ``ttl``, and an append (a retry included) through a
    handle opened without ``ttl`` clears it.

``chatkeep_set_updated(session_id, updated) -> None``
    For a store declaring ``recent``: set the time its index of last appends holds for the
    session (seconds since the epoch, by the store's clock) to ``updated``, as if the
    session's last append that stored a record had happened then. The suite writes one
    time for several sessions with it (no store's clock can be made to repeat from
    outside) and checks that ``recent_sessions`` lists them newest first, ties by id
    descending, and that keyset pages ending inside the tie go on after it.

``chatkeep_tidy() -> None``
    A clean-up hook, not a check (no report row): remove what the backend keeps beside the
    sessions once no session needs it (marker keys, an emptied namespace's bookkeeping), so
    that a store whose sessions were all deleted holds nothing. The suite calls it after
    deleting the sessions a test wrote. Other handles may be reading and writing the same
    store meanwhile (``-n 2``): remove only what the backend can do without or rebuild.
"""

from __future__ import annotations

from typing import Literal, Protocol, runtime_checkable

__all__ = [
    "DAMAGE",
    "DAMAGE_KINDS",
    "DURABILITY",
    "DURABILITY_LEVELS",
    "EXPIRY",
    "SET_UPDATED",
    "STORAGE_CONTAINS",
    "TEST_HOOKS",
    "TIDY",
    "Damageable",
    "DurabilityReporting",
    "ExpiryReporting",
    "StorageInspectable",
    "Tidying",
    "TieSetting",
]

DAMAGE = "chatkeep_damage"
STORAGE_CONTAINS = "chatkeep_storage_contains"
DURABILITY = "chatkeep_durability"
EXPIRY = "chatkeep_expiry"
SET_UPDATED = "chatkeep_set_updated"
#: The clean-up hook (not in :data:`TEST_HOOKS`: no report row depends on it).
TIDY = "chatkeep_tidy"

#: Every test hook the suite knows.
TEST_HOOKS: tuple[str, ...] = (DAMAGE, STORAGE_CONTAINS, DURABILITY, EXPIRY, SET_UPDATED)

DamageKind = Literal["garbage", "truncated", "missing"]

#: The kinds of damage ``chatkeep_damage`` may be asked for.
DAMAGE_KINDS: tuple[DamageKind, ...] = ("garbage", "truncated", "missing")

#: The answers of ``chatkeep_durability``, weakest first.
DURABILITY_LEVELS: tuple[str, ...] = ("nothing", "process", "server", "power")


@runtime_checkable
class Damageable(Protocol):
    """A backend with the damage hook."""

    def chatkeep_damage(self, session_id: str, position: int, kind: DamageKind) -> None:
        """Damage the record at ``position`` (see the module docstring)."""


@runtime_checkable
class StorageInspectable(Protocol):
    """A backend with the storage-inspection hook."""

    def chatkeep_storage_contains(self, data: bytes) -> bool:
        """Whether ``data`` is anywhere in the backend's storage."""


@runtime_checkable
class DurabilityReporting(Protocol):
    """A backend that says what an acknowledged append survives."""

    def chatkeep_durability(self) -> str:
        """``"nothing"``, ``"process"``, ``"server"`` or ``"power"``."""


@runtime_checkable
class ExpiryReporting(Protocol):
    """A backend that says when a session expires."""

    def chatkeep_expiry(self, session_id: str) -> float | None:
        """Seconds since the epoch (the store's clock), or ``None``: never, or no session."""


@runtime_checkable
class TieSetting(Protocol):
    """A backend that lets the suite set the time ``recent`` orders a session by."""

    def chatkeep_set_updated(self, session_id: str, updated: float) -> None:
        """Set the session's last-append time (seconds since the epoch, the store's clock)."""


@runtime_checkable
class Tidying(Protocol):
    """A backend that removes its own bookkeeping once no session needs it."""

    def chatkeep_tidy(self) -> None:
        """Remove what outlives the deleted sessions (see the module docstring)."""
