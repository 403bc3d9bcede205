"""``chatkeep search``, ``chatkeep sessions list -q`` and ``chatkeep index build``.

Hits are printed one per line, ``STORED  SESSION  #POSITION  ROLE  SNIPPET``, the matched
words highlighted on a terminal (plain when piped, or with ``NO_COLOR`` set); ``--json``
prints one JSON object per hit (JSON Lines). A scan that takes longer than a second says
how far it got on stderr. Exit 1 when nothing matched, like grep.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from typing import IO

from chatkeep.core import CorruptRecord, SearchHit, SearchProgress, Store, search
from chatkeep.core.metadata import describe_session
from chatkeep.core.urls import redact_text

from .stores import StoreChoice, open_store_for

__all__ = ["build_index_command", "parse_since", "run_search", "sessions_matching"]

_SPAN = re.compile(r"^\s*(\d+)\s*([smhdw])\s*$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}
_HIGHLIGHT = ("\x1b[1;33m", "\x1b[0m")


def parse_since(value: str) -> datetime:
    """``7d``, ``12h``, ``30m``, ``2w``, ``90s`` (that long ago) or an ISO 8601 date or
    time (naive: UTC). Raises ``ValueError`` with what is accepted."""
    span = _SPAN.match(value)
    if span is not None:
        amount, unit = span.groups()
        return datetime.now(timezone.utc) - timedelta(**{_UNITS[unit]: int(amount)})
    try:
        moment = datetime.fromisoformat(value.strip())
    except ValueError:
        raise ValueError(
            f"{value!r} is not a time: give 7d, 12h, 30m, 2w, 90s or a date like 2026-12-01"
        ) from None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=timezone.utc)


@contextmanager
def _store(choice: StoreChoice) -> Iterator[Store]:
    store = open_store_for(choice, read_only=True)
    try:
        yield store
    finally:
        store.close()


class _ScanProgress:
    """Progress of a long search on stderr: nothing for the first second, then a line a
    second (rewritten in place on a terminal)."""

    def __init__(self, stream: IO[str] | None = None) -> None:
        self.stream = sys.stderr if stream is None else stream
        self.started = self.last = time.monotonic()
        self.shown = False

    def __call__(self, state: SearchProgress) -> None:
        now = time.monotonic()
        if now - self.started < 1.0 or now - self.last < 1.0:
            return
        self.last = now
        megabytes = state.characters / 1e6
        line = (
            f"chatkeep: searched {state.sessions:,} sessions, {state.messages:,} messages "
            f"({megabytes:,.1f} MB of text), {state.hits:,} hits"
        )
        if self.stream.isatty():
            self.stream.write("\r" + line + "\x1b[K")
        else:
            self.stream.write(line + "\n")
        self.stream.flush()
        self.shown = True

    def done(self) -> None:
        if self.shown and self.stream.isatty():
            self.stream.write("\r\x1b[K")
            self.stream.flush()


def _color() -> bool:
    return sys.stdout.isatty() and not os.environ.get("NO_COLOR")


def _line(hit: SearchHit, color: bool) -> str:
    when = "-" if hit.stored_at is None else hit.stored_at.strftime("%Y-%m-%d %H:%M:%S")
    where = "retracted" if hit.position is None else f"#{hit.position}"
    snippet = hit.marked(*_HIGHLIGHT) if color else hit.snippet
    return f"{when}  {hit.session_id}  {where}  {hit.role}  {snippet}"


def run_search(
    choice: StoreChoice,
    query: str,
    *,
    limit: int | None,
    since: datetime | None,
    prefix: str | None,
    roles: Sequence[str] | None,
    as_json: bool,
    include_retracted: bool = False,
) -> int:
    """``chatkeep search``: print the hits; 0 when something matched, else 1."""
    color = _color()
    progress = _ScanProgress()
    found = 0
    with _store(choice) as store:
        hits = search(
            store,
            query,
            prefix=prefix,
            since=since,
            roles=roles or None,
            limit=limit,
            include_retracted=include_retracted,
            progress=progress,
        )
        try:
            for hit in hits:
                found += 1
                line = (
                    json.dumps(hit.to_json(), ensure_ascii=False) if as_json else _line(hit, color)
                )
                print(line, flush=True)
        except CorruptRecord as error:
            progress.done()
            print(f"chatkeep: error: {redact_text(str(error))}", file=sys.stderr)
            return 1
        progress.done()
    return 0 if found else 1


def sessions_matching(
    choice: StoreChoice,
    query: str,
    *,
    limit: int | None,
    prefix: str | None,
    as_json: bool,
    quiet: bool,
) -> int:
    """``chatkeep sessions list -q QUERY``: the sessions with a hit, in the search's
    order (newest first), listed as ``sessions list`` lists; exit 1 when none matched."""
    progress = _ScanProgress()
    seen: dict[str, None] = {}
    rows: list[tuple[str, str, str, str]] = []
    with _store(choice) as store:
        for hit in search(store, query, prefix=prefix, limit=None, progress=progress):
            if hit.session_id in seen:
                continue
            seen[hit.session_id] = None
            if quiet:
                print(hit.session_id, flush=True)
            else:
                try:
                    info = describe_session(store, hit.session_id)
                except CorruptRecord as error:
                    print(f"chatkeep: warning: {redact_text(str(error))}", file=sys.stderr)
                    continue
                if as_json:
                    row = {
                        "id": info.id,
                        "messages": info.messages,
                        "messages_exact": info.messages_exact,
                        "created_at": _iso(info.created_at),
                        "updated_at": _iso(info.updated_at),
                        "title": info.title,
                        "match": hit.snippet,
                    }
                    print(json.dumps(row, ensure_ascii=False), flush=True)
                else:
                    count = f"{info.messages}" + ("" if info.messages_exact else "+")
                    when = (
                        "-"
                        if info.updated_at is None
                        else info.updated_at.strftime("%Y-%m-%d %H:%M:%S")
                    )
                    rows.append((info.id, count, when, _short(hit.snippet)))
            if limit is not None and len(seen) >= limit:
                break
        progress.done()
    if rows:
        from .output import print_table

        print_table(("ID", "MESSAGES", "UPDATED", "MATCH"), rows)
    return 0 if seen else 1


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def _short(text: str, width: int = 60) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def build_index_command(choice: StoreChoice, *, batch: int) -> int:
    """``chatkeep index build``: index what the store's full-text index does not cover
    yet, with a progress bar on a terminal (a line a second otherwise)."""
    from chatkeep.core import CapabilityMissing
    from chatkeep.core.search_index import build_index

    with open_store_for(choice) as store:
        if not store.supports("fulltext"):
            raise CapabilityMissing(store.name, "fulltext")
        total = store.fulltext_pending()
        if total == 0:
            print("chatkeep: the full-text index is complete; nothing to build", file=sys.stderr)
            return 0
        if sys.stderr.isatty():
            from rich.console import Console
            from rich.progress import Progress

            with Progress(console=Console(file=sys.stderr)) as bar:
                task = bar.add_task("indexing records", total=total)

                def show(done: int, whole: int) -> None:
                    bar.update(task, completed=done, total=whole)

                indexed = build_index(store, batch=batch, progress=show)
        else:
            last = [time.monotonic()]

            def line(done: int, whole: int) -> None:
                if time.monotonic() - last[0] >= 1.0:
                    last[0] = time.monotonic()
                    print(
                        f"chatkeep: indexed {done:,}/{whole:,} records", file=sys.stderr, flush=True
                    )

            indexed = build_index(store, batch=batch, progress=line)
        print(
            f"chatkeep: indexed {indexed:,} records; the full-text index is complete",
            file=sys.stderr,
        )
    return 0
