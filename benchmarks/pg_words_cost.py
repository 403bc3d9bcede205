"""What the full-text index costs a PostgreSQL append, measured inside the server.

    python benchmarks/pg_words_cost.py [--appends 1000] [--url postgresql://...]

In a fresh schema (migrated by the store, then dropped), one plpgsql loop interleaves
``--appends`` appends of one exchange (two ~300-byte messages, the bench's text) to 50
sessions for each of three variants: the ``append`` function alone; with the words written
as migration 6 writes them (a row a record, no unique key, only when the append stored a
record); with the words as migration 5 wrote them (a row a record under a
``md5(record_id)`` unique key, ``ON CONFLICT DO UPDATE``). ``clock_timestamp()`` around each
statement, no commit: neither the client, the network nor the commit's wait hides the
index's own work. Prints each variant's mean and its ratio to the append alone.
"""

from __future__ import annotations

import argparse
import random
import secrets

import psycopg
from search_bench import _session, _words

from chatkeep.core import encode_records, open_store
from chatkeep.core.search_text import record_words

_OLD_TABLE = """
CREATE TABLE old_fulltext (
    namespace text COLLATE "C" NOT NULL, session_id text COLLATE "C" NOT NULL,
    record_id text COLLATE "C" NOT NULL, words tsvector NOT NULL);
CREATE UNIQUE INDEX ON old_fulltext (namespace, session_id, md5(record_id));
CREATE INDEX ON old_fulltext USING gin (words);
CREATE TABLE batches (n int, ids text[], data bytea[], words text[]);
"""

_LOOP = """
CREATE FUNCTION pg_temp.bench(p_n int) RETURNS TABLE(variant text, us float8)
LANGUAGE plpgsql AS $$
DECLARE b record; t0 timestamptz; v int; sid text; r int; tot float8[] := ARRAY[0, 0, 0];
BEGIN
  FOR b IN SELECT * FROM batches ORDER BY n LOOP
    v := b.n % 3; sid := 's' || (b.n / 3 % 50);
    t0 := clock_timestamp();
    IF v = 0 THEN
      PERFORM append('', 'a' || sid, b.ids, b.data, NULL::interval);
    ELSIF v = 1 THEN
      WITH appended AS (SELECT append('', 'b' || sid, b.ids, b.data, NULL::interval) AS result),
      indexed AS (INSERT INTO fulltext (namespace, session_id, record_id, words)
        SELECT '', 'b' || sid, u.id, array_to_tsvector(string_to_array(u.words, ' '))
          FROM unnest(b.ids, b.words) AS u(id, words)
         WHERE u.words <> '' AND (SELECT result FROM appended) > 0)
      SELECT result INTO r FROM appended;
    ELSE
      WITH appended AS (SELECT append('', 'c' || sid, b.ids, b.data, NULL::interval) AS result),
      indexed AS (INSERT INTO old_fulltext (namespace, session_id, record_id, words)
        SELECT '', 'c' || sid, u.id, array_to_tsvector(string_to_array(u.words, ' '))
          FROM unnest(b.ids, b.words) AS u(id, words) WHERE u.words <> ''
        ON CONFLICT (namespace, session_id, md5(record_id)) DO UPDATE SET words = excluded.words)
      SELECT result INTO r FROM appended;
    END IF;
    tot[v + 1] := tot[v + 1] + extract(epoch FROM clock_timestamp() - t0);
  END LOOP;
  RETURN QUERY VALUES ('append alone', tot[1] / p_n * 1e6),
    ('+ words, migration 6 (a row a record, no key)', tot[2] / p_n * 1e6),
    ('+ words, migration 5 (md5 key, on conflict)', tot[3] / p_n * 1e6);
END $$
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--appends", type=int, default=1000)
    parser.add_argument("--url", default="postgresql://127.0.0.1:5432/test")
    arguments = parser.parse_args()
    schema = "bench_words_" + secrets.token_hex(4)
    rng = random.Random(27)
    words = _words(rng)
    with open_store(f"{arguments.url}?schema={schema}") as store:  # migrated on first use
        store.append("warm", encode_records(_session(rng, words, 1)))
    with psycopg.connect(arguments.url, autocommit=True) as conn:
        try:
            conn.execute(f"SET search_path = {schema}")
            conn.execute(_OLD_TABLE)
            rows = []
            for n in range(arguments.appends * 3):
                batch = encode_records(_session(rng, words, 2))
                ids = [record.id for record in batch]
                data = [record.data for record in batch]
                rows.append((n, ids, data, [record_words(record.data) for record in batch]))
            with conn.cursor() as cursor:
                cursor.executemany("INSERT INTO batches VALUES (%s, %s, %s, %s)", rows)
            conn.execute(_LOOP)
            found = conn.execute("SELECT * FROM pg_temp.bench(%s)", (arguments.appends,))
            results = found.fetchall()
        finally:
            conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
    alone = results[0][1]
    for name, micros in results:
        print(f"{name}: {micros:,.0f} us ({micros / alone:.2f}x)")


if __name__ == "__main__":
    main()
