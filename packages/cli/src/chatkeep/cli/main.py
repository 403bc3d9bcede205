"""The ``chatkeep`` command (click): ``backends``, ``info``, ``demo``, ``sessions``, ``chat``,
``export``, ``import``, ``migrate``, ``conformance``, ``serve``, ``completion``.

Every command that touches a store takes ``--url``; without it ``$CHATKEEP_URL``; without that
``sqlite:///chatkeep.db`` in the current directory (:mod:`chatkeep.cli.stores`). The modules
that do the work are imported by the command that needs them, so ``chatkeep --help`` and
``chatkeep sessions list`` load only what they use.

Exit codes: 0 done; 1 what was checked did not hold (a conformance level below ``full``, a
migration that did not verify, a failed chat turn, a demo that did not behave); 2 a usage or
configuration error (a bad option, a bad URL, a missing store or session), one line on
stderr; 130 interrupted (Ctrl-C); 141 the output pipe was closed (nothing printed).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

import click

from .defaults import DEFAULT_HELP

__all__ = ["cli", "main"]

#: 128 + SIGINT, as shells report Ctrl-C.
EXIT_INTERRUPTED = 130
#: 128 + SIGPIPE, what `yes | head -1` reports for `yes`.
EXIT_BROKEN_PIPE = 141
EXIT_USAGE = 2

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}
URL_HELP = f"Store URL (default: {DEFAULT_HELP})."


def url_option(function: Any) -> Any:
    """The ``--url`` option every store command takes."""
    return click.option("--url", metavar="URL", help=URL_HELP)(function)


def newest_limit_option(what: str) -> Callable[[Any], Any]:
    """The ``-n/--limit`` option of a command that prints its ``what`` newest first."""
    return click.option(
        "-n",
        "--limit",
        type=click.IntRange(min=0),
        default=20,
        show_default=True,
        help=f"At most N {what}, newest first (0: all).",
    )


def _version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if not value or ctx.resilient_parsing:
        return
    from importlib.metadata import PackageNotFoundError, version

    def of(name: str) -> str:
        try:
            return version(name)
        except PackageNotFoundError:
            return "not installed"

    click.echo(
        f"chatkeep {of('chatkeep-cli')} (chatkeep-core {of('chatkeep-core')}, "
        f"Python {sys.version.split()[0]})"
    )
    ctx.exit(0)


def _complete_session(ctx: click.Context, _param: click.Parameter, incomplete: str) -> list[Any]:
    """Session ids of the chosen store for shell completion (read-only; silent on errors)."""
    from .stores import choose, open_store_for

    try:
        store = open_store_for(choose(ctx.params.get("url")), read_only=True)
        try:
            from chatkeep.core.views import list_conversations

            found = []
            for session_id in list_conversations(store, incomplete or None):
                found.append(session_id)
                if len(found) >= 200:
                    break
            return found
        finally:
            store.close()
    except Exception:
        return []


class _PipeClosed(Exception):
    """The reader of our stdout went away (``chatkeep ... | head -1``)."""


class _Group(click.Group):
    """click turns a closed pipe into exit 1; the CLI wants quiet 141, as `yes | head -1`."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except BrokenPipeError as error:
            raise _PipeClosed from error


@click.group(
    cls=_Group,
    context_settings=CONTEXT,
    epilog="""\b
Examples:
  chatkeep demo                          # a conversation stored in ./chatkeep.db
  chatkeep sessions list                 # newest first: ID  MESSAGES  UPDATED  TITLE
  chatkeep sessions show SESSION_ID
  chatkeep chat --session trip           # offline model, no key needed
  chatkeep export > backup.jsonl
  chatkeep migrate sqlite:///chatkeep.db postgresql://localhost/chats
  chatkeep backends

Store URL: --url, else $CHATKEEP_URL, else sqlite:///chatkeep.db in the current directory.
Shell completion: eval "$(chatkeep completion bash)" (also zsh, fish).""",
)
@click.option(
    "--version",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_version,
    help="Show the version and exit.",
)
def cli() -> None:
    """Chat-history storage for Python agents: inspect, chat over, copy and test stores."""


# --- backends -------------------------------------------------------------------------


@cli.command(epilog="\b\nExamples:\n  chatkeep backends\n  chatkeep backends --json")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def backends(as_json: bool) -> int:
    """List the installed storage backends: name, distribution, version, URL schemes,
    capabilities."""
    import json

    from chatkeep.core import backends as installed

    from .output import print_table

    found = sorted(installed().values(), key=lambda info: info.name)
    if as_json:
        click.echo(json.dumps([info.as_dict() for info in found], indent=2))
        return 0
    rows = [
        (
            info.name,
            info.distribution,
            info.version,
            ",".join(info.schemes),
            ",".join(sorted(info.capabilities)) or "-",
        )
        for info in found
    ]
    print_table(("NAME", "DISTRIBUTION", "VERSION", "SCHEMES", "CAPABILITIES"), rows)
    return 0


# --- info -----------------------------------------------------------------------------


@cli.command(
    epilog="\b\nExamples:\n  chatkeep info\n  chatkeep info --url redis://localhost:6379/0 --json"
)
@url_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of lines.")
def info(url: str | None, as_json: bool) -> int:
    """Where the data is: the store URL (secrets hidden) and where it came from, backend and
    version, capabilities, session count, and a SQLite file's path and size (read-only)."""
    from .info import run_info
    from .stores import choose

    return run_info(choose(url), as_json=as_json)


# --- demo -----------------------------------------------------------------------------


@cli.command(
    epilog="\b\nExamples:\n  chatkeep demo\n  chatkeep demo --url memory://\n"
    "  chatkeep demo --url redis://127.0.0.1:6379/0"
)
@url_option
def demo(url: str | None) -> int:
    """A three-turn conversation with the offline model, resumed by a second process, then
    forked and undone; ends with the command that shows what it stored."""
    from .demo import run_demo
    from .stores import choose

    return run_demo(choose(url))


@cli.command("demo-resume", hidden=True)
@click.option("--url", required=True)
@click.option("--session", required=True)
def demo_resume(url: str, session: str) -> int:
    """The demo's second process."""
    from .demo import run_resume

    return run_resume(url, session)


# --- sessions -------------------------------------------------------------------------


@cli.group(
    epilog="""\b
Examples:
  chatkeep sessions list -n 5
  chatkeep sessions list --prefix trip- --json
  chatkeep sessions list -q "oslo invoice"
  chatkeep sessions show SESSION_ID --last 4
  chatkeep sessions fork SESSION_ID --at MESSAGE_ID
  chatkeep sessions undo SESSION_ID
  chatkeep sessions delete SESSION_ID --cascade"""
)
def sessions() -> None:
    """List, show, fork, undo and delete sessions (list and show never write)."""


def _positive(_ctx: click.Context, _param: click.Parameter, value: int | None) -> int | None:
    if value is not None and value < 1:
        raise click.BadParameter("must be a positive integer")
    return value


@sessions.command("list")
@url_option
@newest_limit_option("sessions")
@click.option("--prefix", metavar="PREFIX", help="Only ids starting with PREFIX.")
@click.option(
    "--json", "as_json", is_flag=True, help="One JSON object per line (JSON Lines), newest first."
)
@click.option("--quiet", is_flag=True, help="Only the ids, one per line.")
@click.option(
    "-q",
    "--query",
    metavar="QUERY",
    help="Only sessions with a message matching QUERY (as chatkeep search; exit 1: none).",
)
def sessions_list(
    url: str | None,
    limit: int,
    prefix: str | None,
    *,
    as_json: bool,
    quiet: bool,
    query: str | None,
) -> int:
    """The stored sessions, newest first: ID  MESSAGES  UPDATED  TITLE (read-only)."""
    from .sessions import list_sessions
    from .stores import choose

    if as_json and quiet:
        raise click.UsageError("--json and --quiet do not go together")
    if query is not None:
        from .search import sessions_matching

        return sessions_matching(
            choose(url), query, limit=limit or None, prefix=prefix, as_json=as_json, quiet=quiet
        )
    return list_sessions(
        choose(url), limit=limit or None, prefix=prefix, as_json=as_json, quiet=quiet
    )


@sessions.command("show")
@click.argument("session_id", metavar="ID", shell_complete=_complete_session)
@url_option
@click.option("--json", "as_json", is_flag=True, help="Print the messages as a JSON array.")
@click.option("--ids", is_flag=True, help="Prefix each message with its id (for fork --at).")
@click.option("--last", type=int, metavar="N", callback=_positive, help="Only the last N.")
@click.option("--raw", is_flag=True, help="Every record of the log (audit trail), not the view.")
def sessions_show(
    session_id: str, url: str | None, *, as_json: bool, ids: bool, last: int | None, raw: bool
) -> int:
    """A session's transcript: roles, text, tool calls and results (read-only)."""
    from .sessions import show_session
    from .stores import choose

    return show_session(choose(url), session_id, as_json=as_json, ids=ids, last=last, raw=raw)


@sessions.command("fork")
@click.argument("session_id", metavar="ID", shell_complete=_complete_session)
@url_option
@click.option("--at", metavar="MESSAGE_ID", help="Fork right after this message.")
@click.option("--new-id", metavar="NEW_ID", help="The new session's id.")
def sessions_fork(session_id: str, url: str | None, at: str | None, new_id: str | None) -> int:
    """Start a new session from this one (nothing copied); prints the new id."""
    from .sessions import fork_session
    from .stores import choose

    return fork_session(choose(url), session_id, at=at, new_id=new_id)


@sessions.command("undo")
@click.argument("session_id", metavar="ID", shell_complete=_complete_session)
@url_option
@click.option("--turns", type=int, default=1, metavar="N", callback=_positive, show_default=True)
def sessions_undo(session_id: str, url: str | None, turns: int) -> int:
    """Retract the last N turns (the log keeps them)."""
    from .sessions import undo_session
    from .stores import choose

    return undo_session(choose(url), session_id, turns=turns)


@sessions.command("delete")
@click.argument("session_id", metavar="ID", shell_complete=_complete_session)
@url_option
@click.option("--cascade", is_flag=True, help="Delete its forks too.")
def sessions_delete(session_id: str, url: str | None, cascade: bool) -> int:
    """Erase a session (its forks keep their history unless --cascade)."""
    from .sessions import delete_session
    from .stores import choose

    return delete_session(choose(url), session_id, cascade=cascade)


# --- chat -----------------------------------------------------------------------------


@cli.command(
    epilog="""\b
Examples:
  chatkeep chat                                    # offline model, a new session
  chatkeep chat --session trip                     # continue (or start) 'trip'
  chatkeep chat --vendor deepseek --protocol messages --model deepseek-chat
  printf 'Hi\\n/history\\n' | chatkeep chat --session s   # scripted: a line per turn
Inside: /history [N], /sessions, /new [ID], /switch ID, /fork, /undo, /help, /quit."""
)
@url_option
@click.option("--session", metavar="ID", help="The session to continue or start.")
@click.option("--vendor", help="A vendor preset: openai, azure, deepseek, qwen, kimi, glm, ...")
@click.option(
    "--protocol",
    type=click.Choice(["chat_completions", "responses", "conversations", "messages"]),
    help="The API protocol (default: the vendor's chat_completions, or messages).",
)
@click.option("--model", help="The model (or Azure deployment) name.")
@click.option(
    "--base-url",
    metavar="URL",
    help="The service address instead of the preset's ($CHATKEEP_BASE_URL).",
)
@click.option("--no-store", is_flag=True, help="Responses API with store=False.")
@click.option("--instructions", metavar="TEXT", help="System instructions sent every turn.")
@click.option("--no-stream", is_flag=True, help="Print each reply when it is complete.")
def chat(**options: Any) -> int:
    """Chat with a model (offline by default) over any store; /help inside."""
    from .chat import run_chat
    from .stores import choose

    return run_chat(choose(options.pop("url")), **options)


# --- export / import / migrate ---------------------------------------------------------


@cli.command(
    "export",
    epilog="\b\nExamples:\n  chatkeep export > backup.jsonl\n"
    "  chatkeep export sqlite:///chats.db --session trip --session work -o two.jsonl",
)
@click.argument("url", metavar="[URL]", required=False)
@click.option("--url", "url_option", metavar="URL", help=URL_HELP.replace(".", " (or as URL)."))
@click.option(
    "--session", "session_ids", multiple=True, metavar="ID", help="Only this session (repeat)."
)
@click.option(
    "-o", "--output", type=click.Path(dir_okay=False, allow_dash=True), default="-",
    help="Write here instead of stdout.",
)  # fmt: skip
def export_command(
    url: str | None, url_option: str | None, session_ids: tuple[str, ...], output: str
) -> int:
    """Write the store's sessions as JSON Lines (read-only). URL defaults like --url."""
    from .transfer import run_export

    return run_export(_url_or_option(url, url_option), list(session_ids) or None, output)


def _url_or_option(url: str | None, url_option: str | None) -> Any:
    """The store of ``export``/``import``: the URL argument or ``--url``, not both."""
    from .stores import choose

    if url and url_option:
        raise click.UsageError("give the store as URL or as --url, not both")
    if url:
        return choose(url, option="the URL argument")
    return choose(url_option)


@cli.command(
    "import",
    epilog="\b\nExamples:\n  chatkeep import < backup.jsonl\n"
    "  chatkeep import postgresql://localhost/chats -i backup.jsonl",
)
@click.argument("url", metavar="[URL]", required=False)
@click.option("--url", "url_option", metavar="URL", help=URL_HELP.replace(".", " (or as URL)."))
@click.option(
    "-i", "--input", "source", type=click.Path(dir_okay=False, allow_dash=True), default="-",
    help="Read here instead of stdin.",
)  # fmt: skip
def import_command(url: str | None, url_option: str | None, source: str) -> int:
    """Append an export's records to the store (records already there are skipped)."""
    from .transfer import run_import

    return run_import(_url_or_option(url, url_option), source)


@cli.command(
    epilog="\b\nExamples:\n  chatkeep migrate sqlite:///chatkeep.db postgresql://localhost/chats\n"
    "  chatkeep migrate sqlite:///a.db sqlite:///b.db --session trip"
)
@click.argument("source")
@click.argument("destination")
@click.option(
    "--session", "session_ids", multiple=True, metavar="ID", help="Only this session (repeat)."
)
@click.option("--no-verify", is_flag=True, help="Skip the comparison after copying.")
def migrate(source: str, destination: str, session_ids: tuple[str, ...], no_verify: bool) -> int:
    """Copy sessions from SOURCE to DESTINATION and verify them (exit 1 on a mismatch);
    re-running it after an interruption copies only what is missing."""
    from .stores import StoreChoice
    from .transfer import run_migrate

    return run_migrate(
        StoreChoice(source, "the SOURCE argument"),
        StoreChoice(destination, "the DESTINATION argument"),
        list(session_ids) or None,
        verify=not no_verify,
    )


# --- search -----------------------------------------------------------------------------


def _since(_ctx: click.Context, _param: click.Parameter, value: str | None) -> object:
    if value is None:
        return None
    from .search import parse_since

    try:
        return parse_since(value)
    except ValueError as error:
        raise click.BadParameter(str(error)) from None


@cli.command(
    "search",
    epilog="""\b
Examples:
  chatkeep search oslo invoice
  chatkeep search '"exact phrase" -draft' --since 7d --role user
  chatkeep search get_weather --json -n 0 | jq .session_id
Query: words (all must match, each the start of a word), "phrases", -excluded; case and
accents ignored. Exit: 0 hits printed, 1 nothing matched, 2 usage error.""",
)
@click.argument("query", nargs=-1, required=True)
@url_option
@newest_limit_option("hits")
@click.option(
    "--since", metavar="WHEN", callback=_since, help="Only messages since 7d, 12h, a date..."
)
@click.option("--prefix", metavar="PREFIX", help="Only sessions whose id starts with PREFIX.")
@click.option(
    "--role", "roles", multiple=True, metavar="ROLE", help="Only ROLE's messages (repeatable)."
)
@click.option("--retracted", is_flag=True, help="Also undone and edited-away messages.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per hit (JSON Lines).")
def search_command(
    query: tuple[str, ...],
    *,
    url: str | None,
    limit: int,
    since: Any,
    prefix: str | None,
    roles: tuple[str, ...],
    retracted: bool,
    as_json: bool,
) -> int:
    """Find messages across the store's conversations (read-only), newest first:
    STORED  SESSION  #POSITION  ROLE  SNIPPET."""
    from .search import run_search
    from .stores import choose

    return run_search(
        choose(url),
        " ".join(query),
        limit=limit or None,
        since=since,
        prefix=prefix,
        roles=list(roles),
        as_json=as_json,
        include_retracted=retracted,
    )


@cli.group(epilog="\b\nExamples:\n  chatkeep index build --url sqlite:///chats.db")
def index() -> None:
    """The store's full-text index (backends with the fulltext capability)."""


@index.command("build")
@url_option
@click.option(
    "--batch",
    type=click.IntRange(min=1),
    default=500,
    show_default=True,
    help="Records per transaction.",
)
def index_build(url: str | None, batch: int) -> int:
    """Index the records stored before the index existed, with a progress bar. Resumable:
    stopped part way, run it again to go on."""
    from .search import build_index_command
    from .stores import choose

    return build_index_command(choose(url), batch=batch)


# --- conformance ----------------------------------------------------------------------


class _PassThrough(click.Command):
    """Arguments after ``--`` go to pytest untouched; before it, click parses (so an
    unknown option is a usage error, never a failing store)."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if "--" in args:
            split = args.index("--")
            ctx.meta["pytest_args"] = args[split + 1 :]
            args = args[:split]
        return super().parse_args(ctx, args)


@cli.command(
    cls=_PassThrough,
    epilog="""\b
Examples:
  chatkeep conformance sqlite:///c.db
  chatkeep conformance memory:// --json
  chatkeep conformance redis://localhost:6379/0 -- -x -k Slice
Exit: 0 level full, 1 partial or failed, 2 usage error or the store did not open, 130
interrupted. Needs the suite: pip install 'chatkeep[testing]'.""",
)
@click.argument("url")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option("-q", "--quiet", is_flag=True, help="Hide pytest's output; print the report.")
@click.option("--keep-sessions", is_flag=True, help="Keep the sessions the suite wrote.")
@click.pass_context
def conformance(
    ctx: click.Context, url: str, as_json: bool, quiet: bool, keep_sessions: bool
) -> int:
    """Run the conformance suite against the store at URL and print its capability report
    (arguments after -- go to pytest). It writes and deletes test sessions: not on
    production data."""
    from .stores import StoreChoice, check_url

    check_url(StoreChoice(url, "the URL argument"))
    try:
        from chatkeep.testing.__main__ import main as run
    except ImportError:
        from chatkeep.core import ChatkeepError

        raise ChatkeepError(
            "chatkeep conformance needs the conformance suite: pip install 'chatkeep[testing]'"
        ) from None
    flags = [
        flag
        for flag, given in (
            ("--json", as_json),
            ("--quiet", quiet),
            ("--keep-sessions", keep_sessions),
        )
        if given
    ]
    return run([*flags, url, "--", *ctx.meta.get("pytest_args", [])], prog="chatkeep conformance")


# --- serve ----------------------------------------------------------------------------


@cli.command(
    epilog="""\b
Examples:
  chatkeep serve                                   # http://127.0.0.1:8700/ over ./chatkeep.db
  chatkeep serve --url redis://127.0.0.1:6379/0 --open
  chatkeep serve --host 0.0.0.0 --token "$CHATKEEP_WEB_TOKEN"   # a long random token
Needs the web page: pip install 'chatkeep[web]'."""
)
@url_option
@click.option("--host", default="127.0.0.1", show_default=True, help="The address to bind.")
@click.option("--port", type=click.IntRange(0, 65535), default=8700, show_default=True)
@click.option("--open", "open_browser", is_flag=True, help="Open the page in a browser.")
@click.option(
    "--token",
    metavar="TOKEN",
    envvar="CHATKEEP_WEB_TOKEN",
    help="Every request must carry it; required for a non-loopback --host ($CHATKEEP_WEB_TOKEN).",
)
def serve(url: str | None, host: str, port: int, open_browser: bool, token: str | None) -> int:
    """A read-only web page over the store: sessions, conversations, tool calls, forks,
    undo and compaction markers, downloads. Never writes."""
    try:
        from chatkeep.web.serve import check_token
        from chatkeep.web.serve import serve as run_server
    except ImportError:
        from chatkeep.core import ChatkeepError

        raise ChatkeepError(
            "chatkeep serve needs the web page: pip install 'chatkeep[web]'"
        ) from None
    from .stores import choose, open_store_for

    check_token(host, token)  # before the store opens: a refused --host touches nothing
    choice = choose(url)
    store = open_store_for(choice, read_only=True)
    try:
        return run_server(
            store,
            store_shown=choice.shown,
            host=host,
            port=port,
            token=token,
            open_browser=open_browser,
        )
    finally:
        store.close()


# --- completion -----------------------------------------------------------------------


@cli.command(
    epilog='\b\nExamples:\n  eval "$(chatkeep completion bash)"     # in ~/.bashrc\n'
    '  eval "$(chatkeep completion zsh)"      # in ~/.zshrc\n'
    "  chatkeep completion fish > ~/.config/fish/completions/chatkeep.fish"
)
@click.argument("shell", type=click.Choice(["bash", "zsh", "fish"]))
def completion(shell: str) -> int:
    """Print the shell completion script (commands, options, session ids)."""
    from click.shell_completion import get_completion_class

    complete = get_completion_class(shell)
    assert complete is not None  # every choice has a class
    click.echo(complete(cli, {}, "chatkeep", "_CHATKEEP_COMPLETE").source())
    return 0


# --- the entry point ------------------------------------------------------------------


def _error(text: str) -> None:
    """One line on stderr: a driver's multi-line message is joined, secrets hidden."""
    from chatkeep.core.urls import redact_text

    line = " ".join(redact_text(text).split())
    print(f"chatkeep: error: {line}", file=sys.stderr, flush=True)


def _quiet_library_logs() -> None:
    """The CLI reports a failure in one line; a backend's retry warnings before it would
    only be noise (no handler of chatkeep's loggers: Python's last-resort one prints them)."""
    import logging

    chatkeep_logger = logging.getLogger("chatkeep")
    if not chatkeep_logger.handlers:
        chatkeep_logger.addHandler(logging.NullHandler())


def _silence_stdout() -> None:
    """After a closed pipe: point stdout at /dev/null so the interpreter's final flush does
    not print a second error."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code (never raises for Ctrl-C, a closed pipe,
    a usage error or a chatkeep error)."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    if "chatkeep.cli.stores" in sys.modules:
        sys.modules["chatkeep.cli.stores"].forget_store()
    _quiet_library_logs()
    try:
        try:
            result = cli.main(args=arguments, prog_name="chatkeep", standalone_mode=False)
        finally:
            sys.stdout.flush()
    except click.exceptions.Exit as done:
        return done.exit_code
    except click.UsageError as error:
        error.show()
        return EXIT_USAGE
    except click.ClickException as error:
        error.show()
        return error.exit_code
    except (click.Abort, KeyboardInterrupt):
        return EXIT_INTERRUPTED  # click already ended the line on stderr
    except (BrokenPipeError, _PipeClosed):
        _silence_stdout()
        return EXIT_BROKEN_PIPE
    except Exception as error:
        if not _is_chatkeep_error(error):
            raise
        _error(_with_store(str(error)))
        return EXIT_USAGE
    return result if isinstance(result, int) else 0


def _is_chatkeep_error(error: Exception) -> bool:
    """Whether ``error`` is a ChatkeepError, without importing the core to find out (a
    process that never imported it cannot have raised one: ``--help`` stays light)."""
    errors = sys.modules.get("chatkeep.core.errors")
    return errors is not None and isinstance(error, errors.ChatkeepError)


def _with_store(message: str) -> str:
    """``message`` naming the store the command used, unless it already does."""
    from chatkeep.core.urls import redact_url

    from .stores import as_typed, current_store

    message = as_typed(message)
    choice = current_store()
    if choice is None or redact_url(choice.url) in message or "(from " in message:
        return message
    return f"{message} [store: {choice.shown}]"
