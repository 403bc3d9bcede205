"""Every piece of SQL text the PostgreSQL backend runs, in one module.

The tables and server-side functions of each migration, the statements the store executes,
and the small queries of migrations, test hooks and read-only checks. Names are filled in
from :class:`~chatkeep.postgres.layout.Names` (validated and quoted with
``psycopg.sql.Identifier``); no SQL text is ever built from user input. Values always travel
as bound parameters.
"""

from __future__ import annotations

from dataclasses import dataclass

from psycopg import sql

from .fulltext_sql import render_queries
from .layout import Names

__all__ = [
    "APPEND_CONFLICT_STATE",
    "RECORD_CONFLICT_STATE",
    "Queries",
    "migration_1",
    "migration_2",
    "migration_3",
    "migration_4",
]


def _statements(text: str, names: Names) -> sql.Composed:
    """Format ``text`` with ``{name}`` placeholders as qualified names and ``{bare_<name>}``
    as bare identifiers (:meth:`Names.mapping`)."""
    return sql.SQL(text).format(**names.mapping())


# -- migration 1: the initial layout ------------------------------------------------------

_V1_TABLES = """
CREATE TABLE {sessions} (
    namespace  text COLLATE "C" NOT NULL DEFAULT '',
    session_id text COLLATE "C" NOT NULL,
    length     bigint NOT NULL DEFAULT 0 CHECK (length >= 0),
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz,
    CONSTRAINT {bare_sessions_pkey} PRIMARY KEY (namespace, session_id)
) WITH (fillfactor = 80);

CREATE INDEX {bare_sessions_expires_idx} ON {sessions} (expires_at)
    WHERE expires_at IS NOT NULL;

CREATE TABLE {records} (
    namespace  text COLLATE "C" NOT NULL DEFAULT '',
    session_id text COLLATE "C" NOT NULL,
    seq        bigint NOT NULL CHECK (seq >= 0),
    record_id  text COLLATE "C" NOT NULL,
    data       bytea NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT {bare_records_pkey} PRIMARY KEY (namespace, session_id, seq)
);

CREATE UNIQUE INDEX {bare_records_record_id_key}
    ON {records} (namespace, session_id, md5(record_id));

COMMENT ON TABLE {sessions} IS
    'chatkeep: one row per session; length = records stored = next seq';
COMMENT ON TABLE {records} IS
    'chatkeep: one row per record; seq is the gap-free 0-based position in the session';
"""

# Why md5(record_id) in the unique index: a session id may be 512 characters (2 KiB of
# UTF-8) and a record id 256 (1 KiB); together they exceed btree's 2704-byte row limit.

_V1_APPEND = """
DECLARE
    v_count   integer := cardinality(p_ids);
    v_end     bigint;
    v_length  bigint;
    v_added   integer;
    v_ids     text[];
    v_data    bytea[];
BEGIN
    -- Reserve positions by bumping the session's length, which also locks its row:
    -- appenders to one session queue here, so positions never collide. An expired session
    -- restarts from 0. One row write in the common case.
    LOOP
        UPDATE {sessions} AS s
           SET length = CASE WHEN s.expires_at <= now() THEN 0 ELSE s.length END + v_count,
               updated_at = now(),
               expires_at = now() + p_ttl
         WHERE s.namespace = p_namespace AND s.session_id = p_session_id
        RETURNING s.length INTO v_end;
        EXIT WHEN FOUND;
        INSERT INTO {sessions} AS s (namespace, session_id, length, expires_at)
        VALUES (p_namespace, p_session_id, v_count, now() + p_ttl)
        ON CONFLICT DO NOTHING
        RETURNING s.length INTO v_end;
        EXIT WHEN FOUND;  -- else another appender created it just now: update instead
    END LOOP;
    v_length := v_end - v_count;

    IF v_length = 0 THEN
        -- A new session, or an expired one: no old record may resurface (or block a seq).
        DELETE FROM {records} AS r
         WHERE r.namespace = p_namespace AND r.session_id = p_session_id;
    END IF;

    -- Common path: every id is new and lands at v_length, v_length + 1, ... The arbiter
    -- (unique) index skips ids already stored, whatever the planner's statistics say.
    INSERT INTO {records} (namespace, session_id, seq, record_id, data)
    SELECT p_namespace, p_session_id, v_length + b.ord - 1, b.record_id, b.data
      FROM unnest(p_ids, p_data) WITH ORDINALITY AS b(record_id, data, ord)
        ON CONFLICT (namespace, session_id, md5(record_id)) DO NOTHING;
    GET DIAGNOSTICS v_added = ROW_COUNT;

    IF v_added < v_count THEN
        -- Rare path (a retried batch): some ids were stored already, so the rows just
        -- inserted have holes between their positions. This runs under the session lock
        -- with a fresh snapshot, so it sees every earlier append; close the holes by
        -- re-inserting the new rows at consecutive positions, and correct the length.
        SELECT array_agg(r.record_id ORDER BY r.seq), array_agg(r.data ORDER BY r.seq)
          INTO v_ids, v_data
          FROM {records} AS r
         WHERE r.namespace = p_namespace AND r.session_id = p_session_id
           AND r.seq >= v_length;
        -- A skipped id must be stored under exactly that id: a different id with the same
        -- md5 is refused loudly rather than dropped.
        IF EXISTS (
            SELECT 1 FROM unnest(p_ids) AS i(record_id)
             WHERE NOT (i.record_id = ANY (coalesce(v_ids, ARRAY[]::text[])))
               AND NOT EXISTS (
                   SELECT 1 FROM {records} AS r
                    WHERE r.namespace = p_namespace AND r.session_id = p_session_id
                      AND md5(r.record_id) = md5(i.record_id)
                      AND r.record_id = i.record_id))
        THEN
            RAISE EXCEPTION USING ERRCODE = 'unique_violation',
                MESSAGE = 'chatkeep: two record ids of one session share an md5 digest';
        END IF;
        IF v_added > 0 THEN
            DELETE FROM {records} AS r
             WHERE r.namespace = p_namespace AND r.session_id = p_session_id
               AND r.seq >= v_length;
            INSERT INTO {records} (namespace, session_id, seq, record_id, data)
            SELECT p_namespace, p_session_id, v_length + t.ord - 1, t.record_id, t.data
              FROM unnest(v_ids, v_data) WITH ORDINALITY AS t(record_id, data, ord);
        END IF;
        UPDATE {sessions} AS s
           SET length = v_length + v_added
         WHERE s.namespace = p_namespace AND s.session_id = p_session_id;
    END IF;
    RETURN v_added;
END
"""

_V1_DELETE = """
BEGIN
    -- Wait for in-flight appends, then delete with a fresh snapshot that sees them.
    PERFORM 1 FROM {sessions} AS s
      WHERE s.namespace = p_namespace AND s.session_id = p_session_id
        FOR UPDATE;
    DELETE FROM {records} AS r
     WHERE r.namespace = p_namespace AND r.session_id = p_session_id;
    DELETE FROM {sessions} AS s
     WHERE s.namespace = p_namespace AND s.session_id = p_session_id;
    RETURN FOUND;
END
"""

_V1_PURGE = """
DECLARE
    v_purged integer;
BEGIN
    -- SKIP LOCKED: sessions being appended to right now are not expired any more.
    WITH doomed AS (
        SELECT s.namespace, s.session_id
          FROM {sessions} AS s
         WHERE s.expires_at <= now()
           AND (p_namespace IS NULL OR s.namespace = p_namespace)
         ORDER BY s.expires_at
         LIMIT p_limit
           FOR UPDATE SKIP LOCKED
    ), gone AS (
        DELETE FROM {records} AS r USING doomed AS d
         WHERE r.namespace = d.namespace AND r.session_id = d.session_id
    )
    DELETE FROM {sessions} AS s USING doomed AS d
     WHERE s.namespace = d.namespace AND s.session_id = d.session_id;
    GET DIAGNOSTICS v_purged = ROW_COUNT;
    RETURN v_purged;
END
"""

_V1_JSONB = """
BEGIN
    RETURN convert_from(p_data, 'UTF8')::jsonb;
EXCEPTION WHEN data_exception OR untranslatable_character
            OR character_not_in_repertoire THEN
    RETURN NULL;  -- not UTF-8 JSON (binary, compressed or encrypted records)
END
"""

_V1_FUNCTIONS = """
CREATE FUNCTION {append}(
    p_namespace text, p_session_id text, p_ids text[], p_data bytea[], p_ttl interval)
RETURNS integer LANGUAGE plpgsql VOLATILE AS {append_body};

COMMENT ON FUNCTION {append}(text, text, text[], bytea[], interval) IS
    'chatkeep: append a batch atomically; ids already stored are skipped; returns rows added';

CREATE FUNCTION {delete_session}(p_namespace text, p_session_id text)
RETURNS boolean LANGUAGE plpgsql VOLATILE AS {delete_body};

CREATE FUNCTION {purge_expired}(p_namespace text DEFAULT NULL, p_limit integer DEFAULT 1000)
RETURNS integer LANGUAGE plpgsql VOLATILE AS {purge_body};

COMMENT ON FUNCTION {purge_expired}(text, integer) IS
    'chatkeep: delete up to p_limit expired sessions (NULL namespace: all); returns count';

CREATE FUNCTION {jsonb_or_null}(p_data bytea)
RETURNS jsonb LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS {jsonb_body};

CREATE VIEW {messages} AS
SELECT r.namespace, r.session_id, r.seq AS position, r.record_id, r.created_at,
       m.message ->> 'role' AS role, m.message, r.data
  FROM {records} AS r
  JOIN {sessions} AS s ON s.namespace = r.namespace AND s.session_id = r.session_id
 CROSS JOIN LATERAL (SELECT {jsonb_or_null}(r.data) AS message OFFSET 0) AS m
 WHERE s.expires_at IS NULL OR s.expires_at > now();

COMMENT ON VIEW {messages} IS
    'chatkeep: records of live sessions; message is the data as jsonb when it is UTF-8 JSON';
"""


# -- migration 2: an id stored with other data refuses the batch ----------------------------

# The v1 body, plus one check on the rare path: a skipped id whose stored data differs is a
# conflict (SQLSTATE CK409, the record id in DETAIL), so the whole batch rolls back. The
# common path (every id new) is unchanged.
_V2_APPEND = _V1_APPEND.replace(
    "    v_data    bytea[];\n",
    "    v_data    bytea[];\n    v_conflict text;\n",
).replace(
    "    IF v_added < v_count THEN\n",
    """    IF v_added < v_count THEN
        SELECT i.record_id INTO v_conflict
          FROM unnest(p_ids, p_data) AS i(record_id, data)
          JOIN {records} AS r
            ON r.namespace = p_namespace AND r.session_id = p_session_id
           AND md5(r.record_id) = md5(i.record_id) AND r.record_id = i.record_id
         WHERE r.seq < v_length AND r.data <> i.data
         LIMIT 1;
        IF FOUND THEN
            RAISE EXCEPTION USING ERRCODE = 'CK409', DETAIL = v_conflict,
                MESSAGE = 'chatkeep: a record id is stored with other data';
        END IF;
""",
)
assert _V2_APPEND.count("v_conflict") == 3

#: The SQLSTATE the append function raises for a record id stored with other data.
RECORD_CONFLICT_STATE = "CK409"

_V2_FUNCTIONS = """
CREATE OR REPLACE FUNCTION {append}(
    p_namespace text, p_session_id text, p_ids text[], p_data bytea[], p_ttl interval)
RETURNS integer LANGUAGE plpgsql VOLATILE AS {append_body};
"""


def migration_2(names: Names, conn: object) -> list[sql.Composed]:
    """The statements of migration 2."""
    mapping = names.mapping()
    mapping["append_body"] = _render_body(_V2_APPEND, names, conn)
    return [sql.SQL(_V2_FUNCTIONS).format(**mapping)]


# -- migration 3: conditional appends ----------------------------------------------------

_V3_APPEND_IF = """
DECLARE
    v_length  bigint;
    v_expires timestamptz;
    v_last    text;
BEGIN
    -- Lock the session row (created empty if missing, rolled back with a refusal), so the
    -- check and the append are one step: a racing writer waits here, then sees this append.
    INSERT INTO {sessions} AS s (namespace, session_id, length, expires_at)
    VALUES (p_namespace, p_session_id, 0, now() + p_ttl)
    ON CONFLICT DO NOTHING;
    SELECT s.length, s.expires_at INTO v_length, v_expires
      FROM {sessions} AS s
     WHERE s.namespace = p_namespace AND s.session_id = p_session_id
       FOR UPDATE;
    IF v_expires <= now() THEN
        v_length := 0;  -- expired: the session starts over
    END IF;
    IF v_length > 0 THEN
        -- Every id stored already: an exact retry of a call that landed, a no-op whatever
        -- the condition (the append raises CK409 if one of them holds other data).
        IF NOT EXISTS (
            SELECT 1 FROM unnest(p_ids) AS i(record_id)
             WHERE NOT EXISTS (
                 SELECT 1 FROM {records} AS r
                  WHERE r.namespace = p_namespace AND r.session_id = p_session_id
                    AND md5(r.record_id) = md5(i.record_id) AND r.record_id = i.record_id
                    AND r.seq < v_length))
        THEN
            RETURN {append}(p_namespace, p_session_id, p_ids, p_data, p_ttl);
        END IF;
        SELECT r.record_id INTO v_last
          FROM {records} AS r
         WHERE r.namespace = p_namespace AND r.session_id = p_session_id
           AND r.seq = v_length - 1;
    END IF;
    IF v_last IS DISTINCT FROM p_after THEN
        RAISE EXCEPTION USING ERRCODE = 'CK412',
            MESSAGE = 'chatkeep: the session no longer ends at the expected record';
    END IF;
    RETURN {append}(p_namespace, p_session_id, p_ids, p_data, p_ttl);
END
"""

#: The SQLSTATE the conditional append raises when the log changed (AppendConflict).
APPEND_CONFLICT_STATE = "CK412"

_V3_FUNCTIONS = """
CREATE FUNCTION {append_if}(
    p_namespace text, p_session_id text, p_ids text[], p_data bytea[], p_ttl interval,
    p_after text)
RETURNS integer LANGUAGE plpgsql VOLATILE AS {append_if_body};

COMMENT ON FUNCTION {append_if}(text, text, text[], bytea[], interval, text) IS
    'chatkeep: append only if the session ends at record p_after (NULL: empty)';
"""


def migration_3(names: Names, conn: object) -> list[sql.Composed]:
    """The statements of migration 3."""
    mapping = names.mapping()
    mapping["append_if_body"] = _render_body(_V3_APPEND_IF, names, conn)
    return [sql.SQL(_V3_FUNCTIONS).format(**mapping)]


# -- migration 4: the recent capability ----------------------------------------------------

# The v2 body, with updated_at kept when the append stored nothing: the first UPDATE (the
# row lock that reserves positions) still sets it to now(); the rare path, which already
# rewrites the row to correct its length, puts back the time the log's last record was
# stored when no record was added (a retried batch). The common path is unchanged: one
# statement writes the row, updated_at included.
_V4_APPEND = _V2_APPEND.replace(
    """        UPDATE {sessions} AS s
           SET length = v_length + v_added
         WHERE s.namespace = p_namespace AND s.session_id = p_session_id;""",
    """        UPDATE {sessions} AS s
           SET length = v_length + v_added,
               updated_at = CASE WHEN v_added > 0 THEN s.updated_at ELSE coalesce(
                   (SELECT r.created_at FROM {records} AS r
                     WHERE r.namespace = p_namespace AND r.session_id = p_session_id
                       AND r.seq = v_length - 1),
                   s.updated_at) END
         WHERE s.namespace = p_namespace AND s.session_id = p_session_id;""",
)
assert _V4_APPEND != _V2_APPEND

_V4_INDEX = """
CREATE INDEX IF NOT EXISTS {bare_sessions_updated_idx}
    ON {sessions} (namespace, updated_at, session_id);

COMMENT ON COLUMN {sessions}.updated_at IS
    'chatkeep: when an append last stored a record (the recent capability''s order)';
"""


def migration_4(names: Names, conn: object) -> list[sql.Composed]:
    """The statements of migration 4."""
    mapping = names.mapping()
    mapping["append_body"] = _render_body(_V4_APPEND, names, conn)
    return [sql.SQL(_V2_FUNCTIONS).format(**mapping), _statements(_V4_INDEX, names)]


def _render_body(body: str, names: Names, conn: object) -> sql.Literal:
    """A function body, with its names quoted, as a string literal for ``CREATE FUNCTION``."""
    composed = _statements(body, names)
    return sql.Literal(composed.as_string(conn))  # type: ignore[arg-type]


def migration_1(names: Names, conn: object) -> list[sql.Composed]:
    """The statements of migration 1."""
    mapping = names.mapping()
    mapping["append_body"] = _render_body(_V1_APPEND, names, conn)
    mapping["delete_body"] = _render_body(_V1_DELETE, names, conn)
    mapping["purge_body"] = _render_body(_V1_PURGE, names, conn)
    mapping["jsonb_body"] = _render_body(_V1_JSONB, names, conn)
    return [
        _statements(_V1_TABLES, names),
        sql.SQL(_V1_FUNCTIONS).format(**mapping),
    ]


# -- the statements the store runs ----------------------------------------------------------

_BOUNDS = """
WITH bounds AS MATERIALIZED (
    SELECT CASE WHEN %(start)s::bigint < 0 THEN greatest(s.length + %(start)s::bigint, 0)
                ELSE %(start)s::bigint END AS low,
           CASE WHEN %(stop)s::bigint IS NULL THEN s.length
                WHEN %(stop)s::bigint < 0 THEN s.length + %(stop)s::bigint
                ELSE least(%(stop)s::bigint, s.length) END AS high
      FROM {sessions} AS s
     WHERE s.namespace = %(namespace)s AND s.session_id = %(session_id)s
       AND (s.expires_at IS NULL OR s.expires_at > now())
)"""

_READ = """
{bounds}
SELECT u.record_id, u.data
  FROM (SELECT b.low - 1 AS seq, NULL::text COLLATE "C" AS record_id,
               int8send(b.low) || int8send(b.high) AS data
          FROM bounds AS b
        UNION ALL
        (SELECT r.seq, r.record_id, r.data
           FROM {records} AS r
          WHERE r.namespace = %(namespace)s AND r.session_id = %(session_id)s
            AND r.seq >= (SELECT low FROM bounds) AND r.seq < (SELECT high FROM bounds)
          ORDER BY r.seq
         OFFSET 0)) AS u
 ORDER BY u.seq
"""
# The bounds are computed first (a materialized CTE read through InitPlans), so the records
# scan is always a primary-key range scan of exactly the slice, whatever the planner's
# statistics say. (A plain join let a stats-less planner scan the whole session: O(n).)
# The first row is a header, (NULL, low || high as two big-endian int8), ordered before
# every record (its seq is low - 1); it exists exactly when the session does. The store
# compares the records returned with high - low: positions are unique and inside the range,
# so equal counts mean no position is missing. The ordered subquery (OFFSET 0 keeps it one)
# and the header merge without a sort (a Merge Append).

#: The header row's ``data``: the slice's first position and its end, big-endian int8s.
READ_HEADER_FORMAT = ">qq"

_READ_POSITIONS = """
{bounds}
SELECT b.low, b.high, r.seq
  FROM bounds AS b
  LEFT JOIN {records} AS r
    ON r.namespace = %(namespace)s AND r.session_id = %(session_id)s
   AND r.seq >= b.low AND r.seq < b.high
"""
# Only after a read came back short (damage): which positions of the slice exist.

_LIST = """
SELECT s.session_id
  FROM {sessions} AS s
 WHERE s.namespace = %(namespace)s
   AND s.session_id >= %(lower)s AND s.session_id > %(after)s
   {upper}
   AND (s.expires_at IS NULL OR s.expires_at > now())
 ORDER BY s.session_id
 LIMIT %(limit)s
"""


# The newest live sessions strictly before the cursor (updated_at, session_id): a backward
# walk of the (namespace, updated_at, session_id) index from the cursor. The time travels
# as epoch seconds (float8 holds a microsecond timestamptz exactly, both ways).
_RECENT = """
SELECT s.session_id, extract(epoch FROM s.updated_at)::float8
  FROM {sessions} AS s
 WHERE s.namespace = %(namespace)s
   AND (s.updated_at, s.session_id) < (to_timestamp(%(before_at)s::float8), %(before_id)s)
   AND s.session_id >= %(lower)s
   {upper}
   AND (s.expires_at IS NULL OR s.expires_at > now())
   AND s.length > 0
 ORDER BY s.updated_at DESC, s.session_id DESC
 LIMIT %(limit)s
"""


@dataclass(frozen=True)
class Queries:
    """The statements of one (schema, prefix), rendered once to text for psycopg's caches."""

    append: bytes
    append_if: bytes
    read: bytes
    delete: bytes
    purge: bytes
    list_all: bytes
    list_bounded: bytes
    recent_all: bytes
    recent_bounded: bytes
    read_positions: bytes
    damage_garbage: bytes
    damage_truncated: bytes
    damage_missing: bytes
    storage_contains: bytes
    expiry: bytes
    set_updated: bytes
    fulltext_exists: bytes
    fulltext_append: bytes
    fulltext_append_if: bytes
    fulltext_sessions_all: bytes
    fulltext_sessions_bounded: bytes
    fulltext_pending: bytes
    fulltext_backlog: bytes
    fulltext_backfill: bytes

    @classmethod
    def render(cls, names: Names, conn: object) -> Queries:
        """Render every statement with ``conn``'s quoting rules."""

        def text(composable: sql.Composable) -> bytes:
            return composable.as_bytes(conn)  # type: ignore[arg-type]

        upper = sql.SQL("AND s.session_id < %(upper)s")
        bounds = _statements(_BOUNDS, names)
        return cls(
            append=text(
                sql.SQL("SELECT {}(%s, %s, %s::text[], %s::bytea[], %s::interval)").format(
                    names("append")
                )
            ),
            append_if=text(
                sql.SQL(
                    "SELECT {}(%s, %s, %s::text[], %s::bytea[], %s::interval, %s::text)"
                ).format(names("append_if"))
            ),
            read=text(sql.SQL(_READ).format(bounds=bounds, **names.mapping())),
            delete=text(sql.SQL("SELECT {}(%s, %s)").format(names("delete_session"))),
            purge=text(sql.SQL("SELECT {}(%s, %s)").format(names("purge_expired"))),
            list_all=text(sql.SQL(_LIST).format(sessions=names("sessions"), upper=sql.SQL(""))),
            list_bounded=text(sql.SQL(_LIST).format(sessions=names("sessions"), upper=upper)),
            recent_all=text(sql.SQL(_RECENT).format(sessions=names("sessions"), upper=sql.SQL(""))),
            recent_bounded=text(sql.SQL(_RECENT).format(sessions=names("sessions"), upper=upper)),
            read_positions=text(sql.SQL(_READ_POSITIONS).format(bounds=bounds, **names.mapping())),
            damage_garbage=text(_statements(_DAMAGE_GARBAGE, names)),
            damage_truncated=text(_statements(_DAMAGE_TRUNCATED, names)),
            damage_missing=text(_statements(_DAMAGE_MISSING, names)),
            storage_contains=text(_statements(_STORAGE_CONTAINS, names)),
            expiry=text(_statements(_EXPIRY, names)),
            set_updated=text(_statements(_SET_UPDATED, names)),
            **render_queries(names, text),
        )


# -- test hooks (chatkeep.testing.hooks): damage behind the store's back, look for bytes ----

_DAMAGE_GARBAGE = """
UPDATE {records} AS r SET data = '\\xfe000102'::bytea
 WHERE r.namespace = %(namespace)s AND r.session_id = %(session_id)s AND r.seq = %(position)s
RETURNING 1
"""
_DAMAGE_TRUNCATED = """
UPDATE {records} AS r SET data = substr(r.data, 1, greatest(length(r.data) - 3, 1))
 WHERE r.namespace = %(namespace)s AND r.session_id = %(session_id)s AND r.seq = %(position)s
RETURNING 1
"""
_DAMAGE_MISSING = """
DELETE FROM {records} AS r
 WHERE r.namespace = %(namespace)s AND r.session_id = %(session_id)s AND r.seq = %(position)s
RETURNING 1
"""

# Every column a caller's bytes can land in: record data, record and session ids, namespaces.
# Only live row versions: a deleted row's bytes stay in the heap until VACUUM reclaims them.
# The chatkeep_expiry test hook: when the session expires (NULL: never), epoch seconds.
_EXPIRY = """
SELECT extract(epoch FROM s.expires_at) FROM {sessions} AS s
 WHERE s.namespace = %(namespace)s AND s.session_id = %(session_id)s
"""

# The chatkeep_set_updated test hook: the time of the session's last append, epoch seconds.
_SET_UPDATED = """
UPDATE {sessions} AS s SET updated_at = to_timestamp(%(updated)s)
 WHERE s.namespace = %(namespace)s AND s.session_id = %(session_id)s
RETURNING 1
"""

_STORAGE_CONTAINS = """
SELECT EXISTS (
           SELECT 1 FROM {records} AS r
            WHERE position(%(needle)s::bytea IN r.data) > 0
               OR position(%(needle)s::bytea IN convert_to(r.record_id, 'UTF8')) > 0
               OR position(%(needle)s::bytea IN convert_to(r.session_id, 'UTF8')) > 0
               OR position(%(needle)s::bytea IN convert_to(r.namespace, 'UTF8')) > 0)
    OR EXISTS (
           SELECT 1 FROM {sessions} AS s
            WHERE position(%(needle)s::bytea IN convert_to(s.session_id, 'UTF8')) > 0
               OR position(%(needle)s::bytea IN convert_to(s.namespace, 'UTF8')) > 0)
"""


# -- migrations' bookkeeping ------------------------------------------------------------------

#: Whether a relation exists (``to_regclass`` of the qualified name as text).
RELATION_EXISTS = "SELECT to_regclass(%s) IS NOT NULL"
#: Whether a schema exists.
SCHEMA_EXISTS = "SELECT 1 FROM pg_namespace WHERE nspname = %s"
#: Serializes migrations of one schema (key: :attr:`Names.lock_key`).
MIGRATION_LOCK = "SELECT pg_advisory_xact_lock(%s)"


def migration_lock_literal(names: Names) -> sql.Composed:
    """:data:`MIGRATION_LOCK` with the key inlined (for a script a DBA runs)."""
    return sql.SQL("SELECT pg_advisory_xact_lock({})").format(sql.Literal(names.lock_key))


def applied_version(names: Names) -> sql.Composed:
    """The highest version recorded in the migrations table (0 when empty)."""
    return sql.SQL("SELECT coalesce(max(version), 0) FROM {}").format(names.migrations_table)


def applied_versions(names: Names) -> sql.Composed:
    """Every version recorded in the migrations table."""
    return sql.SQL("SELECT version FROM {}").format(names.migrations_table)


def create_schema(names: Names, *, if_not_exists: bool = False) -> sql.Composed:
    """``CREATE SCHEMA`` for the store's schema."""
    text = "CREATE SCHEMA IF NOT EXISTS {}" if if_not_exists else "CREATE SCHEMA {}"
    return sql.SQL(text).format(sql.Identifier(names.schema))


def create_migrations_table(names: Names) -> sql.Composed:
    """The migrations table, if it does not exist yet."""
    return sql.SQL(
        "CREATE TABLE IF NOT EXISTS {} ("
        " version integer PRIMARY KEY,"
        " description text NOT NULL,"
        " applied_at timestamptz NOT NULL DEFAULT now())"
    ).format(names.migrations_table)


def record_migration(names: Names) -> sql.Composed:
    """Record a migration as applied (parameters: version, description)."""
    return sql.SQL("INSERT INTO {} (version, description) VALUES (%s, %s)").format(
        names.migrations_table
    )


def record_migration_literal(names: Names, version: int, description: str) -> sql.Composed:
    """:func:`record_migration` with the values inlined (for a script a DBA runs)."""
    return sql.SQL("INSERT INTO {} (version, description) VALUES ({}, {})").format(
        names.migrations_table, sql.Literal(version), sql.Literal(description)
    )


# -- server settings ------------------------------------------------------------------------

SHOW_FSYNC = "SHOW fsync"
SHOW_SYNCHRONOUS_COMMIT = "SHOW synchronous_commit"
