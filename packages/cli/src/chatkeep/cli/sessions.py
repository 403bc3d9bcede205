"""``chatkeep sessions``: list, show, fork, undo and delete sessions of any store.

Every command takes ``--url`` and falls back to ``CHATKEEP_URL`` (then the core's default,
``sqlite:///chatkeep.db``). ``show`` prints the session's *view* (undo, forks and
compaction applied); ``show --raw`` prints every record of its own log, control records
and retracted messages included (the audit trail).
"""

from __future__ import annotations

import argparse
import json
import os
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
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
    delete_session,
    fork,
    message_to_dict,
    open_store,
    read_view,
    undo,
)
from chatkeep.core.views import LogEntry, list_conversations, read_log

__all__ = ["add_commands", "format_message"]

_ROLE_WIDTH = 9


@contextmanager
def _store(args: argparse.Namespace) -> Iterator[Store]:
    url = args.url or os.environ.get("CHATKEEP_URL") or None
    store = open_store(url)
    try:
        yield store
    finally:
        store.close()


def _require_session(store: Store, session_id: str) -> None:
    if not store.read(session_id, 0, 1):
        raise SessionNotFound(session_id)


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


def _cmd_list(args: argparse.Namespace) -> int:
    with _store(args) as store:
        ids = list(list_conversations(store, args.prefix))
    if args.json:
        print(json.dumps(ids, ensure_ascii=False, indent=2))
    else:
        for session_id in ids:
            print(session_id)
    return 0


def _raw_json(entry: LogEntry) -> dict[str, Any]:
    shown: dict[str, Any] = {"position": entry.position, "id": entry.record_id, "kind": entry.kind}
    if entry.error is not None:
        shown["error"] = entry.error
    else:
        shown["data"] = entry.data
    return shown


def _cmd_show(args: argparse.Namespace) -> int:
    with _store(args) as store:
        _require_session(store, args.session)
        if args.raw:
            entries = read_log(store, args.session)
            if args.json:
                print(
                    json.dumps(
                        [_raw_json(e) for e in entries], ensure_ascii=False, indent=2, default=repr
                    )
                )
                return 0
            for entry in entries:
                where = f"#{entry.position:<4}"
                if entry.message is not None:
                    print(where + " " + format_message(entry.message, show_id=args.ids))
                elif entry.error is not None:
                    print(f"{where} CORRUPT {entry.record_id}: {entry.error}")
                else:
                    fields = {k: v for k, v in (entry.control or {}).items() if k != "type"}
                    if "messages" in fields:
                        fields["messages"] = f"{len(fields['messages'])} message(s)"
                    print(f"{where} ({entry.kind}) {_short_json(fields, 200)}")
            return 0
        view = read_view(store, args.session, limit=args.last)
    if args.json:
        print(
            json.dumps(
                [message_to_dict(m) for m in view], ensure_ascii=False, indent=2, default=repr
            )
        )
        return 0
    for message in view:
        print(format_message(message, show_id=args.ids))
    return 0


def _cmd_fork(args: argparse.Namespace) -> int:
    with _store(args) as store:
        print(fork(store, args.session, at=args.at, new_session_id=args.new_id))
    return 0


def _cmd_undo(args: argparse.Namespace) -> int:
    with _store(args) as store:
        _require_session(store, args.session)
        retracted = undo(store, args.session, turns=args.turns)
    if not retracted:
        print("nothing to undo")
        return 0
    print(f"retracted {len(retracted)} message(s) (the log keeps them; `show --raw` lists them):")
    for message in retracted:
        print(textwrap.indent(format_message(message), "  "))
    return 0


def _cmd_delete(args: argparse.Namespace) -> int:
    with _store(args) as store:
        _require_session(store, args.session)
        delete_session(store, args.session, cascade=args.cascade)
    how = "with its forks" if args.cascade else "its forks, if any, kept their history"
    print(f"deleted {args.session} ({how})")
    return 0


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be a positive integer")
    return value


def add_commands(commands: Any) -> None:
    """Add ``sessions`` and its subcommands to the CLI."""
    sessions = commands.add_parser("sessions", help="list, show, fork, undo and delete sessions")
    sub = sessions.add_subparsers(dest="sessions_command", required=True, metavar="COMMAND")

    def command(name: str, help_text: str) -> argparse.ArgumentParser:
        parser: argparse.ArgumentParser = sub.add_parser(name, help=help_text)
        parser.add_argument("--url", help="store URL (default: $CHATKEEP_URL)")
        return parser

    listing = command("list", "list the ids of stored sessions")
    listing.add_argument("--prefix", help="only ids starting with PREFIX")
    listing.add_argument("--json", action="store_true", help="print a JSON array")
    listing.set_defaults(handler=_cmd_list)

    show = command("show", "print a session's transcript: roles, tool calls and results")
    show.add_argument("session", metavar="ID")
    show.add_argument("--json", action="store_true", help="print the messages as JSON")
    show.add_argument("--ids", action="store_true", help="prefix each message with its id")
    show.add_argument("--last", type=_positive, metavar="N", help="only the last N messages")
    show.add_argument(
        "--raw", action="store_true", help="every record of the log (audit trail), not the view"
    )
    show.set_defaults(handler=_cmd_show)

    forking = command("fork", "start a new session from this one; prints the new id")
    forking.add_argument("session", metavar="ID")
    forking.add_argument("--at", metavar="MESSAGE_ID", help="fork right after this message")
    forking.add_argument("--new-id", metavar="NEW_ID", help="the new session's id")
    forking.set_defaults(handler=_cmd_fork)

    undoing = command("undo", "retract the last turn(s) (the log keeps them)")
    undoing.add_argument("session", metavar="ID")
    undoing.add_argument("--turns", type=_positive, default=1, metavar="N")
    undoing.set_defaults(handler=_cmd_undo)

    deleting = command("delete", "erase a session (its forks keep their history)")
    deleting.add_argument("session", metavar="ID")
    deleting.add_argument("--cascade", action="store_true", help="delete its forks too")
    deleting.set_defaults(handler=_cmd_delete)
