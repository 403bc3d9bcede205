"""``chatkeep chat``: an interactive chat over any store and any client.

::

    chatkeep chat                                   # offline client, $CHATKEEP_URL store
    chatkeep chat --url sqlite:///chats.db --session trip
    chatkeep chat --vendor deepseek --protocol messages --model deepseek-chat
    chatkeep chat --vendor openai --protocol responses --model gpt-5-mini
    printf 'Hi\\n/undo\\nHello\\n' | chatkeep chat --session s1   # scripted: one line per turn

The offline client is the default, so it runs without a key. Commands: ``/history [N]``,
``/sessions``, ``/fork``, ``/undo``, ``/switch ID``, ``/help``, ``/quit``.

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

import argparse
import asyncio
import os
import sys
from dataclasses import replace
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
    open_store,
)
from chatkeep.core.views import afork, alist_conversations, aundo
from chatkeep.vendors import make_client

from .sessions import format_message

__all__ = ["ChatRepl", "add_commands", "build_client"]

#: The ``additional_properties`` key of a transcript message naming the service-side
#: conversation it belongs to: ``{"id": ..., "service": "<protocol> <base url>"}``.
SERVICE_KEY = "service_conversation"

HELP = """commands:
  /history [N]   the session's messages (the last N)
  /sessions      the stored sessions (* marks this one)
  /fork          continue in a new session branched from here
  /undo          retract the last turn (the log keeps it)
  /switch ID     continue another session
  /help          this text
  /quit          leave (end of input does too)"""


def build_client(args: argparse.Namespace) -> tuple[Any, str, str]:
    """The chat client the options ask for, its protocol (``"offline"`` for the offline
    client) and a short description of it.

    No ``--vendor``/``--protocol``/``--model``: the offline client. Otherwise a preset
    client (:func:`chatkeep.vendors.make_client`: ``chatkeep-openai``, or
    ``chatkeep-anthropic`` for ``messages``), with
    ``--base-url`` (or ``$CHATKEEP_BASE_URL``) replacing the preset's address.
    """
    if not (args.vendor or args.protocol or args.model):
        return OfflineChatClient(), "offline", "offline client (no network, no key)"
    if not args.model:
        raise ChatkeepError("--model is required with --vendor/--protocol")
    protocol = args.protocol or ("messages" if args.vendor == "anthropic" else "chat_completions")
    vendor = args.vendor or ("anthropic" if protocol == "messages" else "openai")
    options: dict[str, Any] = {}
    if protocol == "responses":
        options["store"] = not args.no_store
    base_url = args.base_url or os.environ.get("CHATKEEP_BASE_URL") or None
    # MissingPackage (a ChatkeepError) names the client distribution to install.
    client = make_client(vendor, protocol, args.model, base_url=base_url, **options)
    store_note = " (store=False)" if protocol == "responses" and args.no_store else ""
    return client, protocol, f"{vendor} {protocol}{store_note}, model {args.model}"


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

    async def command(self, line: str) -> bool:
        """Run a ``/command``; returns False to leave."""
        name, _, rest = line.partition(" ")
        rest = rest.strip()
        if name in ("/quit", "/exit"):
            return False
        if name == "/help":
            self.say(HELP)
        elif name == "/history":
            limit = int(rest) if rest.isdigit() and int(rest) > 0 else None
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
            if self.linear and await self._has_service_turns():
                self.notice("a Conversations API conversation is linear: a turn cannot be undone")
                return True
            retracted = await aundo(self.store, self.session.session_id)
            if not retracted:
                self.say("nothing to undo")
            for message in retracted:
                self.say("undone: " + format_message(message))
        elif name == "/switch" and rest:
            self.session = AgentSession(rest)
            self.say(f"now in {rest}")
        else:
            self.notice(f"unknown command {line!r}; /help lists them")
        return True

    async def _has_service_turns(self) -> bool:
        last = await aread_view(self.store, self.session.session_id, limit=1)
        return bool(last) and _service_id(last[0], self.service) is not None

    async def run(self, source: TextIO) -> int:
        """Read lines until ``/quit`` or the end of input; returns the exit code (1 if a
        turn failed)."""
        interactive = source.isatty()
        while True:
            if interactive:
                try:
                    line = input("you> ")
                except EOFError:
                    self.say()
                    break
            else:
                raw = source.readline()
                if not raw:
                    break
                line = raw.rstrip("\r\n")
            line = line.strip()
            if not line:
                continue
            try:
                if line.startswith("/"):
                    if not await self.command(line):
                        break
                else:
                    await self.turn(line)
            except ChatkeepError as error:
                self.failed = True
                self.notice(f"error: {error}")
            except Exception as error:  # an SDK's API or connection error: keep chatting
                self.failed = True
                self.notice(f"error: {type(error).__name__}: {error}")
        return 1 if self.failed else 0


def _cmd_chat(args: argparse.Namespace) -> int:
    client, protocol, described = build_client(args)
    store = open_store(args.url or os.environ.get("CHATKEEP_URL") or None)
    repl = ChatRepl(
        store,
        client,
        session_id=args.session,
        protocol=protocol,
        instructions=args.instructions,
        stream=not args.no_stream,
        out=sys.stdout,
        err=sys.stderr,
    )
    print(
        f"chatkeep chat: session {repl.session.session_id} in {store.name} ({store.url}); "
        f"{described}. /help for commands.",
        file=sys.stderr,
    )

    async def main() -> int:
        try:
            return await repl.run(sys.stdin)
        finally:
            closer = getattr(client, "aclose", None)
            if closer is not None:
                await closer()
            await store.aclose()

    return asyncio.run(main())


def add_commands(commands: Any) -> None:
    """Add ``chat`` to the CLI."""
    chat = commands.add_parser(
        "chat", help="chat with a model (offline by default) over any store; /help inside"
    )
    chat.add_argument("--url", help="store URL (default: $CHATKEEP_URL)")
    chat.add_argument("--session", metavar="ID", help="the session to continue or start")
    chat.add_argument("--vendor", help="a vendor preset: openai, azure, deepseek, qwen, ...")
    chat.add_argument(
        "--protocol",
        choices=("chat_completions", "responses", "conversations", "messages"),
        help="the API protocol (default: the vendor's chat_completions, or messages)",
    )
    chat.add_argument("--model", help="the model (or Azure deployment) name")
    chat.add_argument(
        "--base-url", help="the service address instead of the preset's ($CHATKEEP_BASE_URL)"
    )
    chat.add_argument(
        "--no-store",
        action="store_true",
        help="Responses API with store=False (client-managed history)",
    )
    chat.add_argument("--instructions", help="system instructions sent with every turn")
    chat.add_argument("--no-stream", action="store_true", help="print each reply when complete")
    chat.set_defaults(handler=_cmd_chat)
