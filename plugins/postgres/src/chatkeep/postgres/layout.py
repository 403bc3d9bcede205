"""Where the PostgreSQL backend's objects live: the schema, the table prefix and every name
derived from them.

Layout (``chatkeep`` schema and empty prefix by default; see README.md for the full story):

``sessions``   one row per session: ``namespace``, ``session_id``, ``length`` (records stored,
               which is also the next position), ``created_at``, ``updated_at``,
               ``expires_at`` (``NULL``: never).
``records``    one row per record: ``namespace``, ``session_id``, ``seq`` (0-based position,
               gap-free, a total order within the session), ``record_id``, ``data`` (bytea,
               byte-exact), ``created_at``.
``messages``   a view for people: ``data`` decoded as ``jsonb`` where it is UTF-8 JSON.
``append``, ``append_if``, ``delete_session``, ``purge_expired``: server-side functions
(one round trip each). ``schema_migrations``: the applied migration versions.

Every name comes from a validated schema and table prefix (:mod:`chatkeep.postgres.config`)
and is quoted with ``psycopg.sql.Identifier``; no SQL text is ever built from user input.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from psycopg import sql

__all__ = ["OBJECTS", "TABLES", "Names"]

#: Every object chatkeep creates in a (schema, prefix), by its unprefixed name.
OBJECTS: tuple[str, ...] = (
    "sessions",
    "records",
    "messages",
    "append",
    "append_if",
    "delete_session",
    "purge_expired",
    "jsonb_or_null",
    "sessions_pkey",
    "sessions_expires_idx",
    "sessions_updated_idx",
    "records_pkey",
    "records_record_id_key",
    "fulltext",
    "fulltext_key",
    "fulltext_words_idx",
    "fulltext_session_idx",
    "fulltext_backlog",
    "fulltext_forget",
    "fulltext_forget_trigger",
)

#: The tables holding data (what a read-only handle needs, and what erasure must clean).
TABLES: tuple[str, ...] = ("sessions", "records")


@dataclass(frozen=True)
class Names:
    """Qualified, quoted names of every object in one (schema, table prefix)."""

    schema: str
    prefix: str

    def __call__(self, name: str) -> sql.Identifier:
        """``schema.<prefix><name>`` as a quoted identifier."""
        return sql.Identifier(self.schema, self.prefix + name)

    def bare(self, name: str) -> sql.Identifier:
        """``<prefix><name>`` unqualified (constraint and index names)."""
        return sql.Identifier(self.prefix + name)

    def mapping(self) -> dict[str, sql.Composable]:
        """``{name}`` (qualified) and ``{bare_<name>}`` placeholders for every object."""
        names: dict[str, sql.Composable] = {part: self(part) for part in OBJECTS}
        names.update({"bare_" + part: self.bare(part) for part in OBJECTS})
        return names

    @property
    def migrations_table(self) -> sql.Identifier:
        """The table recording applied migration versions."""
        return self("schema_migrations")

    @property
    def lock_key(self) -> int:
        """A stable 64-bit advisory-lock key for migrating this schema.

        Per schema (not per prefix) so that two prefixes created at once never race on
        ``CREATE SCHEMA``.
        """
        digest = hashlib.blake2b(f"chatkeep:{self.schema}".encode(), digest_size=8).digest()
        return int.from_bytes(digest, "big", signed=True)
