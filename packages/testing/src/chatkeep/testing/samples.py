"""Hostile inputs the suite feeds to a store, public so backend authors can reuse them.

Every entry of :data:`HOSTILE_ID_FRAGMENTS` is a *valid* session id fragment that has broken
a real storage layer somewhere: path traversal in object keys, URL-encoding collisions,
SQL and Redis key injection, glob and ``LIKE`` wildcards, case folding and Unicode
normalization on file systems, control characters in line-based protocols.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from chatkeep.core import Store

__all__ = [
    "BINARY_PAYLOADS",
    "HOSTILE_ID_FRAGMENTS",
    "HOSTILE_RECORD_IDS",
    "INVALID_SESSION_IDS",
    "LITERAL_PREFIX_CHARACTERS",
    "fill_controlled_conversation",
]

HOSTILE_ID_FRAGMENTS: tuple[str, ...] = (
    # paths and traversal
    "../x",
    "..",
    ".",
    "/",
    "a/b",
    "/abs",
    "a//b",
    "a/./b",
    "~",
    "C:\\x",
    "CON",
    "x.",
    ".git",
    # URL encoding: "a%2Fb" must not become "a/b"
    "%2F",
    "a%2Fb",
    "a%2fb",
    "%",
    "%25",
    "+",
    "a b",
    "#frag",
    "?q=1&r=2",
    # SQL and shell injection
    "'",
    '"',
    "'\"",
    "';DROP TABLE sessions;--",
    '";--',
    "`",
    "\\'",
    ":name",
    "$1",
    "${HOME}",
    # Redis keys and line protocols
    "{tag}",
    "a:b",
    "\r\nSET x 1\r\n",
    # glob, regex and LIKE wildcards
    "*",
    "?",
    "[a-z]",
    "^",
    "$",
    ".*",
    "(|)",
    "_",
    "%_",
    # backslashes
    "\\",
    "a\\b",
    "\\\\server\\share",
    # case: kept apart even where file systems fold case
    "Ab",
    "aB",
    "AB",
    "ab",
    "\u212a",  # KELVIN SIGN, casefolds to "k"
    "K",
    "\u00df",  # sharp s, casefolds to "ss"
    "ss",
    # Unicode normalization: NFC vs NFD, compatibility forms
    "\u00e9",  # é precomposed (NFC)
    "e\u0301",  # e + combining acute (NFD)
    "\u00c5",  # Å
    "\u212b",  # ANGSTROM SIGN, NFC-normalizes to Å
    "\ufb01",  # ﬁ ligature, NFKC-normalizes to "fi"
    "fi",
    # whitespace and control characters
    " ",
    " lead",
    "trail ",
    "\t",
    "\n",
    "a\nb",
    "\r",
    "\u00a0",
    "\u3000",
    "\x01",
    "\x1b[31m",
    "\x7f",
    # emoji and other non-BMP or unusual code points
    "\U0001f600",
    "\U0001f469\u200d\U0001f469\u200d\U0001f467",
    "\U0001f1eb\U0001f1f7",
    "\U0010ffff",
    "\ue000",
    "\ufffd",
    "\ufeff",
    "\u200b",
    "\u202e",
    '{"a": 1}',
    "\\u0000",
)

#: Values that are not valid session ids; the core must raise ``InvalidSessionId``.
INVALID_SESSION_IDS: tuple[object, ...] = (
    "",
    "x" * 513,
    "\U0001f600" * 513,
    "\x00",
    "a\x00b",
    "\ud800",
    "a\udfffb",
    42,
    None,
    b"bytes",
    ["a"],
)

#: Record ids a backend must store and return exactly.
HOSTILE_RECORD_IDS: tuple[str, ...] = (
    "a/b",
    "../x",
    "'\";--",
    "\U0001f600",
    "e\u0301",
    "\u00e9",
    "Ab",
    "aB",
    "%2F",
    " ",
    "a\nb",
    "{tag}",
    "*",
    "r" * 256,
)

#: Byte strings a backend must store and return exactly.
BINARY_PAYLOADS: tuple[bytes, ...] = (
    b"",
    bytes(range(256)),
    bytes(range(255, -1, -1)),
    b"\x00",
    b"\x00" * 16,
    b"a\x00b",
    b"\xff\xfe\xc3\x28",  # invalid UTF-8
    b"\xed\xa0\x80",  # a UTF-8-encoded surrogate: invalid UTF-8
    b"\xc0\xaf",  # overlong encoding of "/"
    b"trailing newline\n",
    b"\r\n",
    b"   ",
    b'{"json": "but opaque"}',
    "\U0001f600 non-BMP".encode(),
)

#: Characters that are wildcards or escapes in some query language and must be literal in
#: a ``list_sessions`` prefix.
LITERAL_PREFIX_CHARACTERS: tuple[str, ...] = ("%", "_", "*", "?", "[", "]", "\\", "^", ".")


def fill_controlled_conversation(
    store: Store,
    questions: Sequence[str],
    *,
    session_id: str = "chat",
    fork_id: str = "branch",
    fork_question: str = "Bergen?",
    keep: int = 1,
) -> None:
    """Write a conversation whose logs hold every kind of control record (for transfer and
    migration tests): one user/assistant turn per question in ``session_id``, a fork
    ``fork_id`` of it with one more user message, an undo of the last turn, then a
    compaction checkpoint keeping the last ``keep`` messages of the view."""
    from chatkeep.core import Message, compact, encode_records, fork, new_id, undo

    for text in questions:
        turn = [
            Message.user(text, message_id=new_id()),
            Message.assistant("ok: " + text, message_id=new_id()),
        ]
        store.append(session_id, encode_records(turn))
    fork(store, session_id, new_session_id=fork_id)
    store.append(fork_id, encode_records([Message.user(fork_question, message_id=new_id())]))
    undo(store, session_id)
    compact(store, session_id, lambda messages: messages[-keep:])
