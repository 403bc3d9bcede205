"""The SQL of the ``fulltext`` capability on PostgreSQL (the hooks: :mod:`.fulltext`).

A ``tsvector`` per record, GIN-indexed (no unique key since migration 6).

The core hands each record's words over (``chatkeep.core.search_text.record_words``:
folded, space-separated; the backend never parses a record). :meth:`FulltextHooks.
fulltext_append` sends the append function's call and the insert of the words as **one
statement** (a data-modifying CTE): one round trip, one transaction, so an acknowledged
append is searchable and a refused one (``RecordConflict``, ``AppendConflict``) leaves no
words. The words are stored with ``array_to_tsvector`` (no text-search configuration, no
stemming: the lexemes are the core's words exactly) and queried with prefix lexemes
(``'oslo':*``), which the GIN index answers.

Migration 5 adds the table, its indexes, a backlog of the sessions stored before it (one
row per session with the positions still to index) and a trigger that drops a session's
words and backlog when its row is deleted (``delete``, purging expired sessions).
``chatkeep index build`` works the backlog off through a handle of each namespace (the
backlog, like everything a handle sees, is per namespace).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from psycopg import sql

from .layout import Names

__all__ = ["FULLTEXT_QUERIES", "migration_5", "migration_6", "render_queries", "tsquery"]

_V5 = """
CREATE TABLE {fulltext} (
    namespace  text COLLATE "C" NOT NULL,
    session_id text COLLATE "C" NOT NULL,
    record_id  text COLLATE "C" NOT NULL,
    words      tsvector NOT NULL
);
CREATE UNIQUE INDEX {bare_fulltext_key} ON {fulltext} (namespace, session_id, md5(record_id));
CREATE INDEX {bare_fulltext_words_idx} ON {fulltext} USING gin (words);
CREATE TABLE {fulltext_backlog} (
    namespace  text COLLATE "C" NOT NULL,
    session_id text COLLATE "C" NOT NULL,
    done       bigint NOT NULL,
    upto       bigint NOT NULL,
    PRIMARY KEY (namespace, session_id)
);
INSERT INTO {fulltext_backlog} (namespace, session_id, done, upto)
    SELECT namespace, session_id, 0, length FROM {sessions} WHERE length > 0;
CREATE FUNCTION {fulltext_forget}() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM {fulltext} WHERE namespace = OLD.namespace AND session_id = OLD.session_id;
    DELETE FROM {fulltext_backlog}
     WHERE namespace = OLD.namespace AND session_id = OLD.session_id;
    RETURN NULL;
END $$;
CREATE TRIGGER {bare_fulltext_forget_trigger} AFTER DELETE ON {sessions}
    FOR EACH ROW EXECUTE FUNCTION {fulltext_forget}();
COMMENT ON TABLE {fulltext} IS
    'chatkeep: the words of each record, as the core extracted them (fulltext capability)';
"""


def migration_5(names: Names, conn: object) -> list[sql.Composed]:
    """The statements of migration 5."""
    return [sql.SQL(_V5).format(**names.mapping())]


# Migration 6: no unique key on the words. The index names candidate sessions (the core
# re-matches every message of a candidate exactly), so a retry that writes a record's
# words twice is harmless: what the ``md5(record_id)`` key and its ``ON CONFLICT`` cost
# every append bought nothing. A session index replaces it for the trigger's delete.
# Rows stay one a record: a row per append batch was measured cheaper to write, but then
# a session holding two query words in different messages is a candidate too, and a
# two-word query's first 20 hits took seconds at 10,000 sessions (benchmarks README).
_V6 = """
DROP INDEX {fulltext_key};
CREATE INDEX {bare_fulltext_session_idx} ON {fulltext} (namespace, session_id);
"""


def migration_6(names: Names, conn: object) -> list[sql.Composed]:
    """The statements of migration 6."""
    return [sql.SQL(_V6).format(**names.mapping())]


# The records' words, a row each, written only when the append stored a record (an exact
# retry that stores nothing writes none; one that stores part of its batch writes the
# batch's words again, harmlessly: no unique key since migration 6).
_WORDS = """
indexed AS (
    INSERT INTO {fulltext} (namespace, session_id, record_id, words)
    SELECT %s::text, %s::text, u.id, array_to_tsvector(string_to_array(u.words, ' '))
      FROM unnest(%s::text[], %s::text[]) AS u(id, words)
     WHERE u.words <> '' AND (SELECT result FROM appended) > 0
)
SELECT result FROM appended
"""
_APPEND = (
    "WITH appended AS (SELECT {append}(%s, %s, %s::text[], %s::bytea[], %s::interval) "
    "AS result)," + _WORDS
)
_APPEND_IF = (
    "WITH appended AS (SELECT {append_if}(%s, %s, %s::text[], %s::bytea[], %s::interval, "
    "%s::text) AS result)," + _WORDS
)
_SESSIONS = """
SELECT s.session_id, extract(epoch FROM s.updated_at)::float8
  FROM {sessions} AS s
 WHERE s.namespace = %(namespace)s
   AND (s.updated_at, s.session_id) < (to_timestamp(%(before_at)s::float8), %(before_id)s)
   AND s.session_id >= %(lower)s
   {upper}
   AND (s.expires_at IS NULL OR s.expires_at > now())
   AND s.length > 0
   AND s.session_id IN (SELECT f.session_id FROM {fulltext} AS f
                         WHERE f.namespace = %(namespace)s AND f.words @@ %(query)s::tsquery)
 ORDER BY s.updated_at DESC, s.session_id DESC
 LIMIT %(limit)s
"""
_PENDING = """
SELECT coalesce(sum(greatest(upto - done, 0)), 0)::bigint
  FROM {fulltext_backlog} WHERE namespace = %(namespace)s
"""
_BACKLOG = """
WITH finished AS (
    DELETE FROM {fulltext_backlog} AS b
     WHERE b.namespace = %(namespace)s
       AND (b.done >= b.upto OR NOT EXISTS (
            SELECT 1 FROM {records} AS r
             WHERE r.namespace = b.namespace AND r.session_id = b.session_id
               AND r.seq >= b.done AND r.seq < b.upto))
)
SELECT r.session_id, r.seq, r.record_id, r.data
  FROM {fulltext_backlog} AS b
  JOIN {records} AS r
    ON r.namespace = b.namespace AND r.session_id = b.session_id
   AND r.seq >= b.done AND r.seq < b.upto
 WHERE b.namespace = %(namespace)s
 ORDER BY b.session_id, r.seq
 LIMIT %(limit)s
"""
_BACKFILL = """
WITH e AS (
    SELECT * FROM unnest(%(sessions)s::text[], %(seqs)s::int8[], %(ids)s::text[],
                         %(words)s::text[]) AS e(session_id, seq, record_id, words)
), indexed AS (
    INSERT INTO {fulltext} (namespace, session_id, record_id, words)
    SELECT %(namespace)s, e.session_id, e.record_id,
           array_to_tsvector(string_to_array(e.words, ' '))
      FROM e WHERE e.words <> ''
)
UPDATE {fulltext_backlog} AS b SET done = greatest(b.done, m.next)
  FROM (SELECT session_id, max(seq) + 1 AS next FROM e GROUP BY session_id) AS m
 WHERE b.namespace = %(namespace)s AND b.session_id = m.session_id
"""

# Whether migration 5 ran in this (schema, prefix): asked only by a read-only handle,
# which never migrates (a search through it scans a schema without the index).
_EXISTS = """
SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_tables
                WHERE schemaname = %(schema)s AND tablename = %(table)s)
"""

#: The statements :class:`FulltextHooks` runs, by name (fields of ``Queries``).
FULLTEXT_QUERIES = (
    "fulltext_exists",
    "fulltext_append",
    "fulltext_append_if",
    "fulltext_sessions_all",
    "fulltext_sessions_bounded",
    "fulltext_pending",
    "fulltext_backlog",
    "fulltext_backfill",
)


def render_queries(names: Names, text: Callable[[sql.Composable], bytes]) -> dict[str, bytes]:
    """The rendered statements of :data:`FULLTEXT_QUERIES` for one (schema, prefix)."""
    mapping = names.mapping()
    upper = sql.SQL("AND s.session_id < %(upper)s")
    return {
        "fulltext_exists": text(sql.SQL(_EXISTS)),
        "fulltext_append": text(sql.SQL(_APPEND).format(**mapping)),
        "fulltext_append_if": text(sql.SQL(_APPEND_IF).format(**mapping)),
        "fulltext_sessions_all": text(
            sql.SQL(_SESSIONS).format(**{**mapping, "upper": sql.SQL("")})
        ),
        "fulltext_sessions_bounded": text(sql.SQL(_SESSIONS).format(**{**mapping, "upper": upper})),
        "fulltext_pending": text(sql.SQL(_PENDING).format(**mapping)),
        "fulltext_backlog": text(sql.SQL(_BACKLOG).format(**mapping)),
        "fulltext_backfill": text(sql.SQL(_BACKFILL).format(**mapping)),
    }


_PIECE = re.compile(r"[^\W_]+")


def tsquery(groups: Sequence[Sequence[str]]) -> str | None:
    """The ``tsquery`` text for ``groups``: prefix lexemes, ``&`` within a group, ``|``
    between groups; ``None`` when no group has a word. Words are the core's (letters,
    digits and, for the fork word, ``_``), quoted as lexemes, so nothing is parsed."""
    alternatives = []
    for group in groups:
        words = [word for word in group if word and "'" not in word and "\\" not in word]
        if words:
            alternatives.append("(" + " & ".join(f"'{word}':*" for word in words) + ")")
    return " | ".join(alternatives) if alternatives else None
