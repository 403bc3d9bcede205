"""``chatkeep chat``: an interactive chat over any store and any client.

::

    chatkeep chat                                   # offline client, $CHATKEEP_URL store
    chatkeep chat --url sqlite:///chats.db --session trip
    chatkeep chat --vendor deepseek --protocol messages --model deepseek-chat
    chatkeep chat --vendor openai --protocol responses --model gpt-5-mini
    printf 'Hi\\n/undo\\nHello\\n' | chatkeep chat --session s1   # scripted: one line per turn

The offline client is the default, so it runs without a key. Commands: ``/history [N]``,
``/sessions``, ``/new [ID]``, ``/switch ID``, ``/fork``, ``/undo [N]``, ``/help``, ``/quit``.

On a terminal the prompt has readline's line editing and history (arrows, Ctrl-R), kept
across runs in :func:`history_file` (never an error when it cannot be read or written); Ctrl-C
clears the line, and at an empty prompt leaves (exit 130); Ctrl-C during a reply abandons
that turn (nothing of it is stored). Lines are read while the event loop is idle, never from
inside it.

Every turn is kept in the store, whoever keeps the model's copy. With a client-managed
protocol the history provider sends and stores it. With a service-managed one (Responses
with ``store=True``, Conversations) the service keeps the conversation, and the local log
is a transcript whose assistant messages carry the service's conversation id
(``additional_properties["service_conversation"]``): resuming the session continues from
the id on the last message, ``/fork`` and ``/undo`` continue from the id the view then
ends with (a real fork on the Responses API; refused for linear Conversations), and
switching protocol never loses history (a view that does not end on this service's id
is sent whole, once).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, TextIO

from chatkeep.core import (
    Agent,
    AgentSession,
    ChatkeepError,
    HistoryProvider,
    Message,
    OfflineChatClient,
    Store,
    aread_view,
    encode_records,
    new_id,
)
from chatkeep.core.views import afork, alist_conversations, aundo

from .sessions import format_message
from .stores import StoreChoice, open_store_for

__all__ = ["ChatRepl", "build_client", "run_chat"]

#: The ``additional_properties`` key of a transcript message naming the service-side
#: conversation it belongs to: ``{"id": ..., "service": "<protocol> <base url>"}``.
SERVICE_KEY = "service_conversation"

HELP = """commands:
  /history [N]   the session's messages (the last N)
  /sessions      the stored sessions (* marks this one)
  /new [ID]      start a new session (a fresh id unless ID is given)
  /switch ID     continue another stored session
  /fork          continue in a new session branched from here
  /undo [N]      retract the last turn (N turns; the log keeps them)
  /multi         type a message of several lines; a line /end sends it
  /edit          compose the next message in $VISUAL or $EDITOR
  /help          this text
  /quit          leave (end of input and Ctrl-C at an empty prompt do too)
Pasted text of several lines is one message (bracketed paste)."""

#: The bytes a terminal in bracketed-paste mode puts around pasted text.
PASTE_START = "\x1b[200~"
PASTE_END = "\x1b[201~"

#: Commands that take no argument.
_BARE = ("/sessions", "/fork", "/help", "/quit", "/exit", "/multi", "/edit")


def build_client(
    *,
    vendor: str | None = None,
    protocol: str | None = None,
    model: str | None = None,
    base_url: str | None = None,
    no_store: bool = False,
) -> tuple[Any, str, str]:
    """The chat client the options ask for, its protocol (``"offline"`` for the offline
    client) and a short description of it.

    No ``--vendor``/``--protocol``/``--model``: the offline client. Otherwise a preset
    client (:func:`chatkeep.vendors.make_client`: ``chatkeep-openai``, or
    ``chatkeep-anthropic`` for ``messages``), with
    ``--base-url`` (or ``$CHATKEEP_BASE_URL``) replacing the preset's address.
    """
    if not (vendor or protocol or model):
        # keep_requests=0: nobody reads what it was sent, and each request holds the whole
        # history (a long piped session grew to gigabytes).
        client = OfflineChatClient(keep_requests=0)
        return client, "offline", "offline client (no network, no key)"
    if not model:
        raise ChatkeepError("--model is required with --vendor/--protocol")
    protocol = protocol or ("messages" if vendor == "anthropic" else "chat_completions")
    vendor = vendor or ("anthropic" if protocol == "messages" else "openai")
    options: dict[str, Any] = {}
    if protocol == "responses":
        options["store"] = not no_store
    base_url = base_url or os.environ.get("CHATKEEP_BASE_URL") or None
    try:
        from chatkeep.vendors import make_client
    except ImportError:
        extra = "anthropic" if protocol == "messages" else "openai"
        raise ChatkeepError(
            f"--vendor/--protocol/--model need a model client: pip install 'chatkeep[{extra}]'"
        ) from None
    # MissingPackage (a ChatkeepError) names the client distribution to install.
    client = make_client(vendor, protocol, model, base_url=base_url, **options)
    store_note = " (store=False)" if protocol == "responses" and no_store else ""
    return client, protocol, f"{vendor} {protocol}{store_note}, model {model}"


def _service_label(client: Any, protocol: str) -> str:
    return f"{protocol} {getattr(client, 'base_url', type(client).__name__)}"


def _service_id(message: Message, service: str) -> str | None:
    marker = message.additional_properties.get(SERVICE_KEY)
    if isinstance(marker, dict) and marker.get("service") == service:
        found = marker.get("id")
        return found if isinstance(found, str) else None
    return None


class ChatRepl:
    """The chat loop: reads lines, runs turns, answers commands. Output goes to ``out``,
    notices and errors to ``err``."""

    def __init__(
        self,
        store: Store,
        client: Any,
        *,
        session_id: str | None,
        protocol: str,
        instructions: str | None,
        stream: bool,
        out: TextIO,
        err: TextIO,
    ) -> None:
        self.store = store
        self.client = client
        self.provider = HistoryProvider(store)
        # A service-managed client keeps the conversation; the provider then only supplies
        # the history once, when the view does not end on this service's conversation.
        self.agent = Agent(
            client,
            history_provider=self.provider,
            instructions=instructions,
            conflict_policy="clear",
        )
        self.session = AgentSession(session_id)
        self.service = _service_label(client, protocol)
        self.linear = protocol == "conversations"
        self.stream = stream
        self.out = out
        self.err = err
        self.failed = False

    def say(self, text: str = "") -> None:
        """Print to the output."""
        print(text, file=self.out, flush=True)

    def notice(self, text: str) -> None:
        """Print a notice or error (stderr by default)."""
        print(text, file=self.err, flush=True)

    async def _sync_conversation(self) -> None:
        """Point the session at the service conversation its view ends with (none when the
        last message is not this service's: the history is then sent whole)."""
        last = await aread_view(self.store, self.session.session_id, limit=1)
        self.session.conversation_id = _service_id(last[0], self.service) if last else None

    async def turn(self, text: str) -> None:
        """Send one user message and print the reply."""
        await self._sync_conversation()
        request = Message.user(text, message_id=new_id())
        if self.stream:
            running = self.agent.run_stream(request, self.session)
            async for update in running:
                if update.text:
                    print(update.text, end="", file=self.out, flush=True)
            self.say()
            produced = running.response.messages
        else:
            produced = (await self.agent.run(request, self.session)).messages
            self.say("".join(m.text for m in produced))
        conversation_id = self.session.conversation_id
        if conversation_id is not None:
            # The service kept the turn; keep the transcript too, marked with its id.
            marker = {SERVICE_KEY: {"id": conversation_id, "service": self.service}}
            marked = [
                replace(m, additional_properties={**m.additional_properties, **marker})
                for m in produced
            ]
            await self.store.aappend(self.session.session_id, encode_records([request, *marked]))

    def usage(self, text: str) -> bool:
        """Report a bad argument to a command; the chat goes on."""
        self.notice(f"usage: {text}")
        return True

    async def command(self, line: str) -> bool:
        """Run a ``/command``; returns False to leave. A bad argument is reported, never
        ignored."""
        name, _, rest = line.partition(" ")
        rest = rest.strip()
        if name in _BARE and rest:
            return self.usage(f"{name} takes no argument (got {rest!r})")
        if name in ("/quit", "/exit"):
            return False
        if name == "/help":
            self.say(HELP)
        elif name == "/history":
            if rest and not (rest.isdigit() and int(rest) > 0):
                return self.usage(f"/history [N], N a positive whole number (got {rest!r})")
            limit = int(rest) if rest else None
            view = await aread_view(self.store, self.session.session_id, limit=limit)
            for message in view:
                self.say(format_message(message))
            if not view:
                self.say("(no messages yet)")
        elif name == "/sessions":
            if not self.store.supports("list_sessions"):
                self.notice(f"{self.store.name} cannot list sessions")
                return True
            async for session_id in alist_conversations(self.store):
                mark = "*" if session_id == self.session.session_id else " "
                self.say(f"{mark} {session_id}")
        elif name == "/fork":
            if self.linear and await self._has_service_turns():
                self.notice("a Conversations API conversation is linear: it cannot be forked")
                return True
            parent = self.session.session_id
            child = await afork(self.store, parent)
            self.session = AgentSession(child)
            self.say(f"forked {parent} -> {child} (now in {child})")
        elif name == "/undo":
            if rest and not (rest.isdigit() and int(rest) > 0):
                return self.usage(f"/undo [N], N a positive whole number (got {rest!r})")
            if self.linear and await self._has_service_turns():
                self.notice("a Conversations API conversation is linear: a turn cannot be undone")
                return True
            turns = int(rest) if rest else 1
            retracted = await aundo(self.store, self.session.session_id, turns)
            if not retracted:
                self.say("nothing to undo")
            for message in retracted:
                self.say("undone: " + format_message(message))
        elif name == "/switch":
            await self._switch(rest)
        elif name == "/new":
            await self._new(rest or None)
        else:
            self.notice(f"unknown command {line!r}; /help lists them")
        return True

    async def _exists(self, session_id: str) -> bool:
        return bool(await self.store.aread(session_id, 0, 1))

    async def _switch(self, target: str) -> None:
        if not target:
            self.usage("/switch ID (/sessions lists them; /new [ID] starts one)")
        elif target == self.session.session_id:
            self.say(f"already in {target}")
        elif not await self._exists(target):
            self.notice(
                f"session {target!r} does not exist in {self.store.url}; still in "
                f"{self.session.session_id} (/sessions lists them; /new {target} starts it)"
            )
        else:
            self.session = AgentSession(target)
            self.say(f"now in {target}")

    async def _new(self, target: str | None) -> None:
        if target is not None and await self._exists(target):
            self.notice(f"session {target!r} already exists; /switch {target} continues it")
            return
        self.session = AgentSession(target)
        self.say(f"now in {self.session.session_id} (new)")

    async def _has_service_turns(self) -> bool:
        last = await aread_view(self.store, self.session.session_id, limit=1)
        return bool(last) and _service_id(last[0], self.service) is not None

    async def handle(self, line: str) -> bool:
        """One line: a command or a turn. Returns False to leave. Errors are reported and
        the chat goes on."""
        try:
            if not _is_text(line):
                self.failed = True
                self.notice("error: that input is not valid UTF-8 text; nothing was sent")
                return True
            if line.startswith("/"):
                return await self.command(line)
            await self.turn(line)
        except ChatkeepError as error:
            self.failed = True
            self.notice(f"error: {error}")
        except Exception as error:  # an SDK's API or connection error: keep chatting
            self.failed = True
            self.notice(f"error: {type(error).__name__}: {error}")
        return True

    def _pasted(self, line: str, read: Callable[[str], str | None]) -> str:
        """A bracketed paste: every line up to the end marker is one message (a terminal
        without readline's handling of it, or input piped from one, sends the markers)."""
        lines = [line]
        while PASTE_END not in lines[-1]:
            more = read("")
            if more is None:
                break
            lines.append(more)
        return "\n".join(lines).replace(PASTE_START, "").replace(PASTE_END, "")

    def _multi(self, read: Callable[[str], str | None]) -> str | None:
        """``/multi``: the lines up to a line ``/end`` are one message (``None`` when it is
        empty)."""
        self.notice("multi-line message: end it with a line /end")
        lines: list[str] = []
        while True:
            line = read("... ")
            if line is None or line.strip() == "/end":
                break
            lines.append(line)
        text = "\n".join(lines).strip("\n")
        if not text.strip():
            self.notice("empty message: nothing sent")
            return None
        return text

    def _edit(self) -> str | None:
        """``/edit``: the message written in ``$VISUAL`` or ``$EDITOR`` (``vi`` without
        either); ``None`` when the editor failed or left the file empty."""
        editor = os.environ.get("VISUAL") or os.environ.get("EDITOR") or "vi"
        with tempfile.TemporaryDirectory(prefix="chatkeep-edit-") as folder:
            path = Path(folder) / "message.md"
            path.write_text("", encoding="utf-8")
            try:
                done = subprocess.run([*shlex.split(editor), str(path)], check=False)
            except OSError as error:
                self.failed = True
                self.notice(f"error: cannot run the editor {editor!r}: {error.strerror}")
                return None
            if done.returncode != 0:
                self.notice(f"the editor exited with {done.returncode}: nothing sent")
                return None
            text = path.read_text(encoding="utf-8", errors="surrogateescape").strip("\n")
        if not text.strip():
            self.notice("empty message: nothing sent")
            return None
        return text

    def run(self, source: TextIO, loop: asyncio.AbstractEventLoop) -> int:
        """Read lines until ``/quit``, the end of input or Ctrl-C at an empty prompt, each
        handled on ``loop`` (idle while a line is read). Returns the exit code: 0, 1 if a
        turn failed, 130 when Ctrl-C ended it."""
        prompt = _Prompt() if source.isatty() else None

        def read(text: str = "you> ") -> str | None:
            return prompt.read(text) if prompt is not None else _next_line(source)

        while True:
            try:
                line = read()
            except KeyboardInterrupt:
                if prompt is not None and prompt.had_text:
                    continue  # the line is cleared; a new prompt
                self.say()
                return 130
            if line is None:
                if prompt is not None:
                    self.say()
                break
            if PASTE_START in line:
                line = self._pasted(line, read)
            elif line.strip() in ("/multi", "/edit"):
                composed = self._multi(read) if line.strip() == "/multi" else self._edit()
                if composed is None:
                    continue
                line = composed
            line = line.strip()
            if not line:
                continue
            task = loop.create_task(self.handle(line))
            try:
                keep = loop.run_until_complete(task)
            except KeyboardInterrupt:
                task.cancel()  # the turn's coroutine unwinds; bounded, whatever it waits on
                with contextlib.suppress(BaseException):
                    loop.run_until_complete(asyncio.wait([task], timeout=5))
                self.say()
                self.notice("interrupted: nothing of that turn was stored")
                if prompt is None:
                    return 130
                continue
            if not keep:
                break
        return 1 if self.failed else 0


def _is_text(line: str) -> bool:
    """Whether ``line`` is real text: bytes that were not UTF-8 come in from stdin as lone
    surrogates, which no store and no model accepts."""
    try:
        line.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _next_line(source: TextIO) -> str | None:
    raw = source.readline()
    return raw.rstrip("\r\n") if raw else None


#: The environment variable naming the prompt's history file (empty: keep no history file).
HISTORY_ENV = "CHATKEEP_HISTORY_FILE"
#: How many lines the history file keeps.
HISTORY_LINES = 1000


def history_file() -> Path | None:
    """Where the prompt's line history is kept between runs: ``$CHATKEEP_HISTORY_FILE``
    (empty: nowhere), else ``$XDG_STATE_HOME/chatkeep/history``, else
    ``~/.local/state/chatkeep/history``."""
    named = os.environ.get(HISTORY_ENV)
    if named is not None:
        return Path(named).expanduser() if named else None
    state = os.environ.get("XDG_STATE_HOME") or ""
    base = Path(state) if os.path.isabs(state) else Path.home() / ".local" / "state"
    return base / "chatkeep" / "history"


class _Prompt:
    """``input()`` with readline's line editing and history where the platform has it;
    the history is read from :func:`history_file` and written back after each line."""

    def __init__(self) -> None:
        try:
            import readline
        except ImportError:  # Windows without pyreadline: plain input()
            self.readline: Any = None
        else:
            self.readline = readline
        self.had_text = False
        self.history: Path | None = None
        if self.readline is not None:
            try:
                self.history = history_file()
            except (RuntimeError, OSError):  # no home directory to find
                self.history = None
        if self.readline is not None:
            # A paste of several lines arrives as one line (with its newlines): one message.
            with contextlib.suppress(Exception):
                self.readline.parse_and_bind("set enable-bracketed-paste on")
        if self.history is not None:
            self.readline.set_history_length(HISTORY_LINES)
            with contextlib.suppress(OSError, ValueError):
                self.readline.read_history_file(str(self.history))

    def _save(self) -> None:
        """Write the history file; a directory that cannot be made or written is skipped:
        the chat goes on without it."""
        if self.history is None:
            return
        try:
            self.history.parent.mkdir(parents=True, exist_ok=True)
            self.readline.write_history_file(str(self.history))
        except (OSError, ValueError):
            self.history = None  # not writable: stop trying for this run

    def read(self, prompt: str) -> str | None:
        """The next line (``None`` at the end of input). On Ctrl-C, raises
        KeyboardInterrupt with :attr:`had_text` telling whether the line was not empty."""
        self.had_text = False
        previous = None
        if self.readline is not None and threading.current_thread() is threading.main_thread():
            # readline clears its buffer while unwinding a Ctrl-C: look at it before.
            previous = signal.signal(signal.SIGINT, self._interrupted)
        try:
            line = input(prompt)
            if line.strip():
                self._save()
            return line
        except EOFError:
            return None
        except KeyboardInterrupt:
            if self.had_text:
                print(file=sys.stdout, flush=True)  # leave the abandoned line on screen
            raise
        finally:
            if previous is not None:
                signal.signal(signal.SIGINT, previous)

    def _interrupted(self, _signum: int, _frame: Any) -> None:
        self.had_text = bool(self.readline.get_line_buffer())
        raise KeyboardInterrupt


def run_chat(
    choice: StoreChoice,
    *,
    session: str | None,
    vendor: str | None,
    protocol: str | None,
    model: str | None,
    base_url: str | None,
    no_store: bool,
    instructions: str | None,
    no_stream: bool,
) -> int:
    """``chatkeep chat``: the client the options ask for, over the chosen store."""
    client, kind, described = build_client(
        vendor=vendor, protocol=protocol, model=model, base_url=base_url, no_store=no_store
    )
    store = open_store_for(choice)
    try:
        # Reach the store before the banner: an unreachable one is one error line, exit 2,
        # never a banner and then a failure on the first turn.
        store.read(session or "chatkeep-cli-probe", -1)
    except BaseException:
        store.close()
        raise
    repl = ChatRepl(
        store,
        client,
        session_id=session,
        protocol=kind,
        instructions=instructions,
        stream=not no_stream,
        out=sys.stdout,
        err=sys.stderr,
    )
    print(
        f"chatkeep chat: session {repl.session.session_id} in {store.name} ({store.url}); "
        f"{described}. /help for commands.",
        file=sys.stderr,
    )

    async def close() -> None:
        closer = getattr(client, "aclose", None)
        if closer is not None:
            await closer()
        await store.aclose()

    loop = asyncio.new_event_loop()
    try:
        return repl.run(sys.stdin, loop)
    finally:
        try:
            loop.run_until_complete(close())
        finally:
            loop.close()
