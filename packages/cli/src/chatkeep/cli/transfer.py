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
from typing import IO

from chatkeep.core import ChatkeepError, Store
from chatkeep.core.errors import SessionNotFound, VerificationFailed
from chatkeep.core.transfer import TransferStats, export_jsonl, import_jsonl, migrate
from chatkeep.core.urls import redact_text
from chatkeep.core.views import list_conversations

from .output import Progress
from .stores import StoreChoice, open_store_for

__all__ = ["FileUnusable", "run_export", "run_import", "run_migrate"]


@contextmanager
def _opened(choice: StoreChoice, *, read_only: bool) -> Iterator[Store]:
    store = open_store_for(choice, read_only=read_only)
    try:
        yield store
    finally:
        store.close()


class FileUnusable(ChatkeepError, OSError):
    """The ``-i``/``-o`` file could not be opened (missing, a directory, no permission)."""


@contextmanager
def _file(name: str, mode: str, default: IO[str]) -> Iterator[IO[str]]:
    if name == "-":
        # The export format is UTF-8 whatever the locale says.
        encoding = getattr(default, "encoding", None) or ""
        if encoding.lower().replace("-", "") != "utf8":
            reconfigure = getattr(default, "reconfigure", None)
            if reconfigure is not None:
                reconfigure(encoding="utf-8")
        yield default
        return
    try:
        handle = open(name, mode, encoding="utf-8", newline="")  # noqa: SIM115
    except OSError as error:
        verb = "read" if mode == "r" else "write"
        reason = error.strerror or type(error).__name__
        raise FileUnusable(f"cannot {verb} {name!r}: {reason}") from None
    with handle:
        yield handle


def _counted(store: Store, sessions: list[str] | None) -> list[str] | None:
    """On a terminal, every session id up front, so the bar has a total and an ETA."""
    if sessions is None and sys.stderr.isatty():
        return list(list_conversations(store))
    return sessions


def _summary(verb: str, stats: TransferStats) -> str:
    skipped = f", {stats.records_skipped} already there" if stats.records_skipped else ""
    return (
        f"{verb} {stats.sessions} session(s), {stats.records_copied} record(s), "
        f"{stats.bytes} bytes{skipped}"
    )


def run_export(choice: StoreChoice, sessions: list[str] | None, output: str) -> int:
    """Export the chosen store (all sessions, or ``sessions``) as JSON Lines."""
    with _opened(choice, read_only=True) as store, _file(output, "w", sys.stdout) as out:
        with Progress("export") as progress:
            stats = export_jsonl(
                store, out, sessions=_counted(store, sessions), progress=progress.callback
            )
        out.flush()
    print(_summary("exported", stats), file=sys.stderr)
    return 0


def run_import(choice: StoreChoice, source: str) -> int:
    """Import JSON Lines (stdin or a file) into the chosen store."""
    # The input first: a missing file must not create the store.
    with (
        _file(source, "r", sys.stdin) as data,
        _opened(choice, read_only=False) as store,
        Progress("import") as progress,
    ):
        stats = import_jsonl(store, data, progress=progress.callback)
    print(_summary("imported", stats), file=sys.stderr)
    return 0


def run_migrate(
    source: StoreChoice, destination: StoreChoice, sessions: list[str] | None, *, verify: bool
) -> int:
    """Copy ``source`` into ``destination`` and verify; 1 when the copy does not match."""
    with _opened(source, read_only=True) as src:
        # A session the source does not have is the source's problem: say so before the
        # destination is opened (and created).
        for session_id in sessions or ():
            if not src.read(session_id, 0, 1):
                raise SessionNotFound(session_id)
        with _opened(destination, read_only=False) as dst:
            return _copy(src, dst, sessions, verify=verify)


def _copy(src: Store, dst: Store, sessions: list[str] | None, *, verify: bool) -> int:
    try:
        with Progress("migrate") as progress:
            stats = migrate(
                src,
                dst,
                sessions=_counted(src, sessions),
                progress=progress.callback,
                verify=verify,
            )
    except VerificationFailed as error:
        print(f"chatkeep: {redact_text(str(error))}", file=sys.stderr)
        return 1
    checked = " and verified" if verify else " (not verified)"
    print(_summary("copied", stats) + checked, file=sys.stderr)
    return 0
