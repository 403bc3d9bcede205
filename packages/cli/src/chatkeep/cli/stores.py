"""Which store a command uses, and opening it the way the command needs.

Every command takes ``--url``; without it ``$CHATKEEP_URL``; without that
:data:`DEFAULT_URL`, ``sqlite:///chatkeep.db`` in the current directory (the core's own
default, so ``open_store()`` in Python and the CLI agree). :func:`choose` records where the URL
came from, so an error can say so.

Read commands (``sessions list``, ``sessions show``, ``export``) open with
:func:`open_store_for` and ``read_only=True``: a SQLite or PostgreSQL URL gets
``mode=ro`` (a handle that never creates a file, a schema or a table and never writes), and a
SQLite file that does not exist is one line naming the URL and its source, never a new file.
"""

from __future__ import annotations

import contextvars
import os
from dataclasses import dataclass

from chatkeep.core import (
    ChatkeepError,
    Store,
    StoreNotFound,
    UnknownBackend,
    backends,
    open_store,
    redact_url,
)
from chatkeep.core.schemes import extra_for, suggest_url

from .defaults import DEFAULT_HELP, DEFAULT_URL

__all__ = [
    "DEFAULT_HELP",
    "DEFAULT_URL",
    "READ_ONLY_SCHEMES",
    "BadStoreUrl",
    "StoreChoice",
    "StoreMissing",
    "as_typed",
    "check_url",
    "choose",
    "current_store",
    "forget_store",
    "open_store_for",
]

#: Schemes whose backends take ``mode=ro`` (a read-only handle).
READ_ONLY_SCHEMES = frozenset({"sqlite", "postgresql", "postgres"})
#: Shown with every malformed URL.
URL_EXAMPLES = (
    "a store URL looks like sqlite:///chats.db (relative), sqlite:////abs/chats.db, "
    "redis://localhost:6379/0, postgresql://user@host/db or memory://"
)
_current: contextvars.ContextVar[StoreChoice | None] = contextvars.ContextVar(
    "chatkeep_cli_store", default=None
)


# (URL opened, URL typed), both redacted, when a read command added ?mode=ro.
_opened_as: contextvars.ContextVar[tuple[str, str] | None] = contextvars.ContextVar(
    "chatkeep_cli_opened_as", default=None
)


class BadStoreUrl(ChatkeepError, ValueError):
    """``--url`` (or ``$CHATKEEP_URL``) is not a store URL: a bare path, or a scheme no
    installed backend has. The message suggests what was probably meant."""


class StoreMissing(ChatkeepError, LookupError):
    """A read command was pointed at a store that does not exist (a SQLite file that is not
    there). Nothing was created."""


@dataclass(frozen=True)
class StoreChoice:
    """A store URL and where it came from (``--url``, ``$CHATKEEP_URL``, the default)."""

    url: str
    source: str

    @property
    def shown(self) -> str:
        """The URL without secrets, and its source: for messages."""
        return f"{redact_url(self.url)} (from {self.source})"


def choose(url: str | None, *, option: str = "--url") -> StoreChoice:
    """The store a command uses: ``url`` (given as ``option``), else ``$CHATKEEP_URL``, else
    :data:`DEFAULT_URL`."""
    if url is not None:
        if not url.strip():
            raise BadStoreUrl(f"{option} is empty: give a store URL ({URL_EXAMPLES})")
        return StoreChoice(url, option)
    from_env = os.environ.get("CHATKEEP_URL")
    if from_env:
        return StoreChoice(from_env, "$CHATKEEP_URL")
    return StoreChoice(DEFAULT_URL, "the default; set --url or $CHATKEEP_URL")


def forget_store() -> None:
    """Start a command with no store chosen yet."""
    _current.set(None)
    _opened_as.set(None)


def as_typed(message: str) -> str:
    """``message`` with the URL a read command opened (``?mode=ro`` added) shown as the user
    typed it: a driver's error must not show an option nobody gave."""
    opened = _opened_as.get()
    if opened is None:
        return message
    return message.replace(opened[0], opened[1])


def current_store() -> StoreChoice | None:
    """The store the running command opened last (for error messages), if any."""
    return _current.get()


def _scheme(url: str) -> str:
    return url.split("://", 1)[0].lower()


def check_url(choice: StoreChoice) -> None:
    """Refuse a bare path, a URL with too few slashes or an unknown scheme with a suggestion
    (:func:`chatkeep.core.schemes.suggest_url`), and a missing in-repo backend with the extra
    that installs it, before any backend runs."""
    url = choice.url
    shown = redact_url(url)
    found = backends().values()
    installed = {s for info in found for s in info.schemes}
    suggestion = suggest_url(url, installed)
    if "://" not in url:
        hint = f"did you mean {suggestion!r}? " if suggestion else ""
        raise BadStoreUrl(
            f"{shown!r} (from {choice.source}) is not a store URL; {hint}({URL_EXAMPLES})"
        )
    scheme = _scheme(url)
    head = scheme.split("+", 1)[0]
    wrappers = {s for info in found if info.wrapper for s in info.schemes}
    if suggestion is not None and (scheme in installed or head in wrappers):
        raise BadStoreUrl(
            f"{shown!r} (from {choice.source}) is not a store URL; did you mean "
            f"{suggestion!r}? ({URL_EXAMPLES})"
        )
    if scheme in installed:
        return
    if "+" in scheme and head in wrappers:
        return  # a wrapper (encrypted+...): the core checks the inner URL
    extra = extra_for(scheme)
    if extra is not None:
        raise BadStoreUrl(
            f"the {extra} backend is not installed (needed for {shown}, from "
            f"{choice.source}): pip install 'chatkeep[{extra}]'"
        )
    hint = f"did you mean {suggestion!r}? " if suggestion else ""
    raise BadStoreUrl(
        f"no backend has the scheme {scheme!r} of {shown} (from {choice.source}); {hint}"
        f"{URL_EXAMPLES}; installed schemes: {', '.join(sorted(installed))}"
    )


def _read_only_scheme(scheme: str) -> bool:
    """Whether a URL of ``scheme`` takes ``mode=ro``: a backend of
    :data:`READ_ONLY_SCHEMES`, or a wrapper around one (``encrypted+sqlite``)."""
    if scheme in READ_ONLY_SCHEMES:
        return True
    head, plus, inner = scheme.partition("+")
    wrappers = {s for info in backends().values() if info.wrapper for s in info.schemes}
    return bool(plus) and head in wrappers and _read_only_scheme(inner)


def _with_read_only(url: str) -> str:
    head, qmark, query = url.partition("?")
    pairs = [piece for piece in query.split("&") if piece] if qmark else []
    if any(piece.split("=", 1)[0] == "mode" for piece in pairs):
        return url
    return f"{head}?{'&'.join([*pairs, 'mode=ro'])}"


def open_store_for(choice: StoreChoice, *, read_only: bool = False) -> Store:
    """Open the chosen store; ``read_only`` for commands that must never create or write.

    Raises :class:`BadStoreUrl` for a bare path or an unknown scheme, and, with
    ``read_only``, :class:`StoreMissing` for any backend's
    :class:`~chatkeep.core.StoreNotFound` (the core type, whichever backend raises it: a
    SQLite file that does not exist, a wrapper's missing inner store): the CLI knows no
    backend's paths, a read-only handle never creates anything. ``read_only`` opens
    SQLite and PostgreSQL, also inside a wrapper (``encrypted+sqlite://...``), with
    ``mode=ro``.
    """
    _current.set(choice)
    check_url(choice)
    url = choice.url
    if read_only and _read_only_scheme(_scheme(url)):
        url = _with_read_only(url)
        _opened_as.set((redact_url(url), redact_url(choice.url)))
    try:
        return open_store(url)
    except UnknownBackend as error:  # a wrapper's inner scheme
        raise BadStoreUrl(f"{error} ({URL_EXAMPLES})") from None
    except StoreNotFound as error:
        raise StoreMissing(
            f"no store at {redact_url(choice.url)} (from {choice.source}): {error}"
        ) from None
