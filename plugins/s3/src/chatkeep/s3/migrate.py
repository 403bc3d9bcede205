"""Bringing sessions written by chatkeep-s3 0.1 (key layout format 1) to the current layout.

Format 1 kept each session directly under the prefix: ``<prefix>/<session>/seg/<start>``
(one object per append, a zero-byte *guard* once compacted), ``cmp/<start>-<end>``
(compacted chunks) and ``id`` (a long id), with bodies starting ``CKS1``. This version
reads none of it in place; a store finding a session there raises
:class:`~chatkeep.s3.errors.LegacyLayout`. Copy them over once::

    python -m chatkeep.s3.migrate "s3://bucket/prefix?region=eu-west-1"            # copy
    python -m chatkeep.s3.migrate "s3://bucket/prefix?region=eu-west-1" --delete   # and remove

or from Python, ``migrate(store)`` with an open :class:`~chatkeep.s3.store.S3Store`. Each
session is read whole and appended to the new layout in one batch per 1,000 records; record
ids are kept, so running it again (after a crash, say) skips what was already copied.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

from chatkeep.core import open_store
from chatkeep.core.backend import CorruptRecord, Record, redact_url

from .layout import decode_session
from .legacy import decode, is_legacy_segment, legacy_folder, legacy_keys

if TYPE_CHECKING:
    from .store import S3Store

__all__ = ["MigrationResult", "legacy_sessions", "main", "migrate", "read_legacy"]

_BATCH = 1000


def read_legacy(store: S3Store, session_id: str) -> list[Record]:
    """A format-1 session's whole log (any object holding a position will do: chunks and
    the segments they consolidated hold the same records)."""
    folder = legacy_folder(store.layout.root, session_id)
    by_position: dict[int, Record] = {}
    for key in legacy_keys(store.bucket, store.layout.root, session_id):
        if key.endswith("/id"):
            continue
        got = store.bucket.get(key)
        if got is None or not got[0]:
            continue  # gone meanwhile, or a guard (its records are in a chunk)
        try:
            start, records = decode(got[0])
        except (ValueError, KeyError, TypeError) as exc:
            raise CorruptRecord(session_id, 0, f"format-1 object {key}: {exc}") from None
        for offset, record in enumerate(records):
            by_position.setdefault(start + offset, record)
    if not by_position:
        return []
    first = min(by_position)
    log: list[Record] = []
    for position in range(first, max(by_position) + 1):
        found = by_position.get(position)
        if found is None:
            raise CorruptRecord(
                session_id, position, f"format-1 session in {folder} has no object here"
            )
        log.append(found)
    return log


def legacy_sessions(store: S3Store) -> Iterator[str]:
    """The ids of the sessions kept in format 1 under the store's prefix."""
    root = store.layout.root
    for folder in store.bucket.list_folders(root):
        encoded = folder[len(root) : -1]
        if "~" in encoded:
            got = store.bucket.get(f"{folder}id")
            if got is None:
                continue
            try:
                session_id = got[0].decode("utf-8")
            except UnicodeDecodeError:
                continue
            if legacy_folder(root, session_id) != folder:
                continue
        else:
            decoded = decode_session(encoded)
            if decoded is None:
                continue
            session_id = decoded
        first, _ = store.bucket.list_page(f"{folder}seg/", max_keys=1)
        if first and is_legacy_segment(folder, first[0].key):
            yield session_id


@dataclass(frozen=True)
class MigrationResult:
    """What :func:`migrate` did."""

    sessions: int = 0
    records: int = 0
    deleted_objects: int = 0


def migrate(store: S3Store, *, delete: bool = False) -> MigrationResult:
    """Copy every format-1 session under ``store``'s prefix into the current layout (the
    default namespace); with ``delete``, then remove the format-1 objects."""
    sessions = records = deleted = 0
    for session_id in list(legacy_sessions(store)):
        log = read_legacy(store, session_id)
        store.folder(session_id).legacy_checked = True  # the old copy is what we read
        for offset in range(0, len(log), _BATCH):
            store.append(session_id, log[offset : offset + _BATCH])
        sessions += 1
        records += len(log)
        if delete:
            keys = legacy_keys(store.bucket, store.layout.root, session_id)
            store.bucket.delete(keys)
            deleted += len(keys)
    return MigrationResult(sessions, records, deleted)


def main(argv: list[str] | None = None) -> int:
    """``python -m chatkeep.s3.migrate URL [--delete]``."""
    parser = argparse.ArgumentParser(
        prog="python -m chatkeep.s3.migrate",
        description="Copy sessions from the chatkeep-s3 0.1 key layout to the current one.",
    )
    parser.add_argument("url", help="the store's s3:// URL (credentials from the AWS chain)")
    parser.add_argument("--delete", action="store_true", help="remove the old objects once copied")
    args = parser.parse_args(argv)
    if not args.url.startswith("s3://"):
        parser.error("the URL must be an s3:// URL")
    with open_store(args.url, legacy_check=False) as opened:
        result = migrate(cast("S3Store", opened.backend), delete=args.delete)
    print(
        f"{redact_url(args.url)}: {result.sessions} sessions, {result.records} records copied"
        + (f", {result.deleted_objects} old objects removed" if args.delete else "")
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
