"""``chatkeep export``, ``import`` and ``migrate`` over :mod:`chatkeep.core.transfer`.

``export`` opens its store read-only and writes JSON Lines to stdout (or ``-o FILE``);
``import`` reads them from stdin (or ``-i FILE``); ``migrate`` copies between two stores and
verifies the copy (exit 1 on a mismatch). Progress goes to stderr: a rich bar on a terminal,
plain lines otherwise, so stdout stays the data.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO, Any

from chatkeep.core import ChatkeepError, Store

from .output import Progress
from .stores import StoreChoice, open_store_for

__all__ = ["run_export", "run_import", "run_migrate"]


def _api() -> Any:
    try:
        from chatkeep.core import transfer
    except ImportError:
        raise ChatkeepError(
            "export, import and migrate need a chatkeep-core with chatkeep.core.transfer "
            "(upgrade chatkeep-core)"
        ) from None
    return transfer


@contextmanager
def _opened(choice: StoreChoice, *, read_only: bool) -> Iterator[Store]:
    store = open_store_for(choice, read_only=read_only)
    try:
        yield store
    finally:
        store.close()


@contextmanager
def _file(name: str, mode: str, default: IO[str]) -> Iterator[IO[str]]:
    if name == "-":
        yield default
        return
    with open(name, mode, encoding="utf-8", newline="") as handle:
        yield handle


def _summary(verb: str, stats: Any) -> str:
    skipped = f", {stats.records_skipped} already there" if stats.records_skipped else ""
    return (
        f"{verb} {stats.sessions} session(s), {stats.records_copied} record(s), "
        f"{stats.bytes} bytes{skipped}"
    )


def run_export(choice: StoreChoice, sessions: list[str] | None, output: str) -> int:
    """Export the chosen store (all sessions, or ``sessions``) as JSON Lines."""
    with _opened(choice, read_only=True) as store, _file(output, "w", sys.stdout) as out:
        api = _api()
        with Progress("export") as progress:
            stats = api.export_jsonl(store, out, sessions=sessions, progress=progress.callback)
        out.flush()
    print(_summary("exported", stats), file=sys.stderr)
    return 0


def run_import(choice: StoreChoice, source: str) -> int:
    """Import JSON Lines (stdin or a file) into the chosen store."""
    with (
        _opened(choice, read_only=False) as store,
        _file(source, "r", sys.stdin) as data,
        Progress("import") as progress,
    ):
        api = _api()
        stats = api.import_jsonl(store, data, progress=progress.callback)
    print(_summary("imported", stats), file=sys.stderr)
    return 0


def run_migrate(
    source: StoreChoice, destination: StoreChoice, sessions: list[str] | None, *, verify: bool
) -> int:
    """Copy ``source`` into ``destination`` and verify; 1 when the copy does not match."""
    from chatkeep.core import errors

    failed: type[Exception] = getattr(errors, "VerificationFailed", ChatkeepError)
    with _opened(source, read_only=True) as src, _opened(destination, read_only=False) as dst:
        api = _api()
        try:
            with Progress("migrate") as progress:
                stats = api.migrate(
                    src, dst, sessions=sessions, progress=progress.callback, verify=verify
                )
        except failed as error:
            if failed is ChatkeepError:
                raise  # no VerificationFailed in this core: any other error is not one
            print(f"chatkeep: verification failed: {error}", file=sys.stderr)
            for mismatch in getattr(error, "mismatches", [])[:20]:
                print(
                    f"  {mismatch.session_id!r}: {mismatch.source_count} record(s) in the "
                    f"source, {mismatch.destination_count} in the destination",
                    file=sys.stderr,
                )
            return 1
    checked = " and verified" if verify else " (not verified)"
    print(_summary("copied", stats) + checked, file=sys.stderr)
    return 0
