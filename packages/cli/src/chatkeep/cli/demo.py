"""``chatkeep demo``: a multi-turn conversation, then a second process that resumes it,
then a fork of it and an undo in the fork.

The offline client's replies name how many messages it was sent and the first user
message, so the output shows that the resumed process saw the whole history, and that the
fork saw the history it branched from.

It stores where every other command looks (``--url``, ``$CHATKEEP_URL``, else
``sqlite:///chatkeep.db`` in the current directory) and ends with the command that shows what
it stored.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from typing import Any

from chatkeep.core import (
    Agent,
    AgentSession,
    HistoryProvider,
    OfflineChatClient,
    Store,
    fork,
    open_store,
    read_view,
    redact_url,
    undo,
)

from .defaults import DEFAULT_URL
from .stores import StoreChoice, open_store_for

__all__ = ["run_demo", "run_resume"]

TURNS = ("Hi! My name is Ada.", "I am planning a trip to Oslo.", "What should I pack?")
RESUME_TURN = "Do you remember my first message?"
FORK_TURN = "Actually, let's go to Bergen instead."


def run_demo(choice: StoreChoice) -> int:
    """The demo on the chosen store; returns 0 when everything it shows held."""
    url = choice.url
    store = open_store_for(choice)
    provider = HistoryProvider(store)
    agent = Agent(OfflineChatClient(), history_provider=provider)
    session = agent.create_session()
    print(f"store: {store.name} ({store.url})")
    print(f"session: {session.session_id}\n")
    for text in TURNS:
        reply = agent.run_sync(text, session)
        print(f"  user      > {text}")
        print(f"  assistant > {reply.text}")
    expected_seen = 2 * len(TURNS) + 1
    durable = store.supports("durable")
    if store.supports("shared"):
        store.close()
        print("\nresuming the session by id in a second process ...\n")
        child = subprocess.run(
            [
                sys.executable,
                "-m",
                "chatkeep.cli",
                "demo-resume",
                "--url",
                url,
                "--session",
                session.session_id,
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        sys.stdout.write(child.stdout)
        sys.stderr.write(child.stderr)
        if child.returncode != 0:
            print("chatkeep: the resuming process failed", file=sys.stderr)
            return 1
        reply_text = child.stdout
        store = open_store(url)
    else:
        print(f"\n{store.name!r} keeps data in this process only; resuming here instead.\n")
        reply_text = _resume(store, session.session_id)
    try:
        if f"[seen {expected_seen}]" not in reply_text or repr(TURNS[0]) not in reply_text:
            print("chatkeep: the resumed conversation did not see the history", file=sys.stderr)
            return 1
        print(f"\nthe model saw all {expected_seen - 1} earlier messages: history kept.")
        code = _fork_and_undo(store, session.session_id)
    finally:
        store.close()
    if code == 0 and durable:
        print(f"\nsee what it stored:\n  {_show_command(choice, session.session_id)}")
    elif code == 0:
        print(f"\n{redact_url(url)} keeps nothing once this process ends: use a file or a server.")
    return code


def _show_command(choice: StoreChoice, session_id: str) -> str:
    """The ``sessions show`` command line that reads the demo's store."""
    command = ["chatkeep", "sessions", "show", session_id]
    if choice.source == "--url" and choice.url != DEFAULT_URL:
        command += ["--url", redact_url(choice.url)]  # no secret on the screen
    # From $CHATKEEP_URL or the default: the same lookup finds the store again.
    return shlex.join(command)


def _fork_and_undo(store: Store, session_id: str) -> int:
    """Branch the conversation, take a turn in the branch, then undo it."""
    print("\nforking the conversation, then undoing the fork's last turn ...\n")
    original = read_view(store, session_id)
    branch = fork(store, session_id)
    print(f"  fork      > {branch} (continues {session_id}; nothing copied)")
    agent = Agent(OfflineChatClient(), history_provider=HistoryProvider(store))
    reply = agent.run_sync(FORK_TURN, AgentSession(branch))
    print(f"  user      > {FORK_TURN}")
    print(f"  assistant > {reply.text}")
    retracted = undo(store, branch)
    print(f"  undo      > retracted {len(retracted)} messages (the log keeps them for audit)")
    seen = f"[seen {len(original) + 1}]"
    if seen not in reply.text or read_view(store, branch) != original:
        print("chatkeep: the fork or the undo did not behave", file=sys.stderr)
        return 1
    if read_view(store, session_id) != original:
        print("chatkeep: forking changed the original session", file=sys.stderr)
        return 1
    print(
        f"\nthe fork saw all {len(original)} messages of the original; after the undo it "
        "matches the original again, which is unchanged."
    )
    return 0


def _resume(store: Any, session_id: str) -> str:
    agent = Agent(OfflineChatClient(), history_provider=HistoryProvider(store))
    reply = agent.run_sync(RESUME_TURN, AgentSession(session_id))
    out = f"  user      > {RESUME_TURN}\n  assistant > {reply.text}\n"
    print(out, end="")
    return out


def run_resume(url: str, session_id: str) -> int:
    """The demo's second process: one more turn on the session, by id alone."""
    print(f"process {os.getpid()}: session {session_id}")
    with open_store(url) as store:
        _resume(store, session_id)
    return 0
