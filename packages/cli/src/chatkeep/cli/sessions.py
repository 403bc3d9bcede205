"""``chatkeep sessions``: list, show, fork, undo and delete sessions of any store.

The store comes from :mod:`chatkeep.cli.stores` (``--url``, ``$CHATKEEP_URL``, then
``sqlite:///chatkeep.db``). ``list`` and ``show`` open it read-only: they never create a
file, a schema or a table. ``show`` prints the session's *view* (undo, forks and compaction
applied); ``show --raw`` prints every record of its own log, control records and retracted
messages included (the audit trail).
"""

from __future__ import annotations

import json
import sys
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from typing import Any

from chatkeep.core import (
    DataContent,
    FunctionCallContent,
    FunctionResultContent,
    Message,
    ReasoningContent,
    SessionNotFound,
    Store,
    TextContent,
    UnknownContent,
    UriContent,
    fork,
    message_from_dict,
    message_to_dict,
    read_view,
    undo,
)
from chatkeep.core import delete_session as core_delete_session
from chatkeep.core.metadata import SessionInfo, describe_session, list_session_infos
from chatkeep.core.urls import redact_text
from chatkeep.core.views import LogEntry, read_log
from chatkeep.core.views._control import CHECKPOINT, SPLICE

from .stores import StoreChoice, open_store_for

__all__ = [
    "delete_session",
    "fork_session",
    "format_message",
    "list_sessions",
    "show_session",
    "undo_session",
]

_ROLE_WIDTH = 9


@contextmanager
def _store(choice: StoreChoice, *, read_only: bool = False) -> Iterator[Store]:
    store = open_store_for(choice, read_only=read_only)
    try:
        yield store
    finally:
        store.close()


def _short_json(value: Any, limit: int = 300) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False, default=repr)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _content_lines(content: object) -> list[str]:
    if isinstance(content, TextContent):
        return content.text.splitlines() or [""]
    if isinstance(content, FunctionCallContent):
        arguments = content.arguments
        shown = arguments if isinstance(arguments, str) else _short_json(arguments)
        return [f"→ call {content.name}({shown})  [{content.call_id}]"]
    if isinstance(content, FunctionResultContent):
        if content.exception is not None:
            return [f"← error [{content.call_id}]: {content.exception}"]
        return [f"← result [{content.call_id}]: {_short_json(content.result)}"]
    if isinstance(content, DataContent):
        return [f"[{content.media_type}, {len(content.data)} bytes]"]
    if isinstance(content, UriContent):
        return [f"[link {content.uri}]"]
    if isinstance(content, ReasoningContent):
        return [f"(reasoning) {content.text or '…'}"]
    if isinstance(content, UnknownContent):
        return [f"[{content.type or 'unknown'} content]"]
    return [repr(content)]


def format_message(message: Message, *, show_id: bool = False) -> str:
    """One message as transcript lines: ``role  text``, tool calls and results marked."""
    label = message.role if not message.author_name else f"{message.role}:{message.author_name}"
    lines = [line for content in message.contents for line in _content_lines(content)] or [""]
    prefix = f"{message.message_id}  " if show_id else ""
    head = f"{prefix}{label:<{_ROLE_WIDTH}} "
    indent = " " * len(head)
    out = [head + lines[0]]
    out.extend(indent + line for line in lines[1:])
    return "\n".join(out).rstrip()


def _raw_json(entry: LogEntry) -> dict[str, Any]:
    shown: dict[str, Any] = {"position": entry.position, "id": entry.record_id, "kind": entry.kind}
    if entry.error is not None:
        shown["error"] = entry.error
    else:
        shown["data"] = entry.data
    return shown


def _require_session(store: Store, session_id: str) -> None:
    if not store.read(session_id, 0, 1):
        raise SessionNotFound(session_id)


def _when(value: object) -> str:
    """A timestamp (datetime or seconds since the epoch) as local ``YYYY-MM-DD HH:MM:SS``."""
    if value is None:
        return "-"
    if isinstance(value, (int, float)):
        value = datetime.fromtimestamp(float(value), tz=timezone.utc)
    if isinstance(value, datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=timezone.utc)
        return value.astimezone().strftime("%Y-%m-%d %H:%M:%S")
    return str(value)


def _iso(value: object) -> str | None:
    if value is None:
        return None
    if isinstance(value, (int, float)):
        value = datetime.fromtimestamp(float(value), tz=timezone.utc)
    if isinstance(value, datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=timezone.utc)
        return value.astimezone(timezone.utc).isoformat()
    return str(value)


def _messages_cell(info: SessionInfo) -> str:
    """``8``; ``2000+`` for a lower bound (a long uncompacted session); ``?`` when damaged."""
    if info.damaged is not None:
        return "?"
    return str(info.messages) if info.messages_exact else f"{info.messages}+"


def _short(text: str | None, width: int = 50) -> str:
    if not text:
        return ""
    return text if len(text) <= width else text[: width - 1] + "…"


def list_sessions(
    choice: StoreChoice,
    *,
    limit: int | None,
    prefix: str | None,
    as_json: bool = False,
    quiet: bool = False,
) -> int:
    """``sessions list``: newest first, ``ID  MESSAGES  UPDATED  TITLE``, JSON Lines, or
    (``quiet``) the ids alone. JSON Lines and ids stream: each line is printed as its
    session is described (the table waits for its rows, to align its columns)."""
    damaged: dict[str, str] = {}
    rows: list[tuple[str, str, str, str]] = []
    with _store(choice, read_only=True) as store:
        for info in list_session_infos(store, prefix=prefix, limit=limit, newest_first=True):
            if info.damaged is not None:
                damaged[info.id] = reason = redact_text(info.damaged)
                print(f"chatkeep: warning: {reason}", file=sys.stderr)
            if quiet:
                print(info.id, flush=True)
            elif as_json:
                row = {
                    "id": info.id,
                    "messages": info.messages,
                    "messages_exact": info.messages_exact,
                    "created_at": _iso(info.created_at),
                    "updated_at": _iso(info.updated_at),
                    "title": info.title,
                    "damaged": damaged.get(info.id),
                }
                print(json.dumps(row, ensure_ascii=False), flush=True)
            else:
                title = (
                    _short(f"damaged: {damaged[info.id]}")
                    if info.id in damaged
                    else _short(info.title)
                )
                rows.append((info.id, _messages_cell(info), _when(info.updated_at), title))
    code = 1 if damaged else 0
    if quiet or as_json:
        return code
    from .output import print_table

    print_table(("ID", "MESSAGES", "UPDATED", "TITLE"), rows)
    return code


def show_session(
    choice: StoreChoice,
    session_id: str,
    *,
    as_json: bool,
    ids: bool,
    last: int | None,
    raw: bool,
) -> int:
    """``sessions show``: the view as a transcript (or JSON), or the raw log."""
    with _store(choice, read_only=True) as store:
        _require_session(store, session_id)
        if raw:
            entries = read_log(store, session_id)
            if as_json:
                shown = [_raw_json(e) for e in entries]
                print(json.dumps(shown, ensure_ascii=False, indent=2, default=repr))
                return 0
            for entry in entries:
                where = f"#{entry.position:<4}"
                if entry.message is not None:
                    print(where + " " + format_message(entry.message, show_id=ids))
                elif entry.error is not None:
                    print(f"{where} CORRUPT {entry.record_id}: {entry.error}")
                else:
                    print(f"{where} ({entry.kind}) {_control_line(entry, ids)}")
            return 0
        view = read_view(store, session_id, limit=last)
        header = _header(store, session_id, len(view) if last is None else None)
    if as_json:
        dicts = [message_to_dict(m) for m in view]
        print(json.dumps(dicts, ensure_ascii=False, indent=2, default=repr))
        return 0
    print(header)
    for message in view:
        print(format_message(message, show_id=ids))
    return 0


def _control_line(entry: LogEntry, ids: bool) -> str:
    """What a control record says, on one line; an in-place edit (``chatkeep.splice``)
    or a checkpoint in words, followed by the messages it puts in the view."""
    control = entry.control or {}
    if entry.kind in (SPLICE, CHECKPOINT) and isinstance(control.get("messages"), list):
        keep, drop = control.get("keep"), control.get("drop")
        count = len(control["messages"])
        if entry.kind == CHECKPOINT:
            head = f"the view from here: {count} message(s), then the last {keep} before"
        else:
            where = "at the end" if keep == 0 else f"before the last {keep} message(s)"
            head = f"edit {where}: {drop} message(s) out, {count} in"
        lines = [head]
        for item in control["messages"]:
            try:
                message = message_from_dict(item)
            except (TypeError, ValueError, KeyError):
                continue
            lines.append("      + " + format_message(message, show_id=ids))
        return "\n".join(lines)
    fields = {k: v for k, v in control.items() if k != "type"}
    if "messages" in fields:
        fields["messages"] = f"{len(fields['messages'])} message(s)"
    return _short_json(fields, 200)


def _header(store: Store, session_id: str, count: int | None) -> str:
    """``# ID: N messages, created ..., updated ...`` (``N+``: at least N, for a long
    session shown with ``--last``; ``count``: the view's length when it was read whole)."""
    info = describe_session(store, session_id)
    shown = _messages_cell(info) if count is None else str(count)
    return (
        f"# {session_id}: {shown} messages, created {_when(info.created_at)}, "
        f"updated {_when(info.updated_at)}"
    )


def fork_session(
    choice: StoreChoice, session_id: str, *, at: str | None, new_id: str | None
) -> int:
    """``sessions fork``: prints the new session's id."""
    with _store(choice) as store:
        _require_session(store, session_id)
        print(fork(store, session_id, at=at, new_session_id=new_id))
    return 0


def undo_session(choice: StoreChoice, session_id: str, *, turns: int) -> int:
    """``sessions undo``: retract the last ``turns`` turns and print them."""
    with _store(choice) as store:
        _require_session(store, session_id)
        retracted = undo(store, session_id, turns=turns)
    if not retracted:
        print("nothing to undo")
        return 0
    print(f"retracted {len(retracted)} message(s) (the log keeps them; `show --raw` lists them):")
    for message in retracted:
        print(textwrap.indent(format_message(message), "  "))
    return 0


def delete_session(choice: StoreChoice, session_id: str, *, cascade: bool) -> int:
    """``sessions delete``: erase a session (and its forks with ``cascade``)."""
    with _store(choice) as store:
        _require_session(store, session_id)
        core_delete_session(store, session_id, cascade=cascade)
    how = "with its forks" if cascade else "its forks, if any, kept their history"
    print(f"deleted {session_id} ({how})")
    return 0
