"""Store URL schemes: which extra installs each in-repo backend, and what a mistyped URL meant.

One table (:data:`IN_REPO_BACKENDS`) says, for every backend this repository ships, its
name, the URL schemes it registers and the extra of the ``chatkeep`` meta-distribution that
installs it. :func:`install_hint` and :func:`suggest_url` read it; the core's
:class:`~chatkeep.core.errors.UnknownBackend` and the CLI both use them, so advice never names an
extra that does not exist::

    >>> install_hint("postgresql")
    "pip install 'chatkeep[postgres]'"
    >>> suggest_url("sqlite:/chats.db")
    'sqlite:///chats.db'
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable
from dataclasses import dataclass

from .urls import redact_url

__all__ = [
    "IN_REPO_BACKENDS",
    "InRepoBackend",
    "backend_name",
    "extra_for",
    "install_hint",
    "suggest_url",
]


@dataclass(frozen=True)
class InRepoBackend:
    """A backend shipped in this repository: its name, URL schemes and installing extra."""

    name: str
    schemes: tuple[str, ...]
    extra: str


#: Every in-repo backend but the built-in ``memory`` (tests check this against the registry
#: and against the meta-distribution's extras).
IN_REPO_BACKENDS: tuple[InRepoBackend, ...] = (
    InRepoBackend("sqlite", ("sqlite",), "sqlite"),
    InRepoBackend("redis", ("redis", "rediss", "redis+cluster", "rediss+cluster"), "redis"),
    InRepoBackend("postgres", ("postgresql", "postgres"), "postgres"),
    InRepoBackend("s3", ("s3",), "s3"),
    InRepoBackend("azure-blob", ("azblob",), "azure-blob"),
    InRepoBackend("encrypted", ("encrypted",), "encrypted"),
)
_BY_KEY = {key: row for row in IN_REPO_BACKENDS for key in (row.name, *row.schemes)}
_KNOWN_SCHEMES = frozenset({"memory", *(s for row in IN_REPO_BACKENDS for s in row.schemes)})
_WRAPPERS = frozenset({"encrypted"})
# "scheme:" followed by anything but "//": a URL typed with too few slashes.
_SHORT_URL = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*):/?(?!/)(?P<rest>.*)$", re.DOTALL)


def _row(scheme_or_name: str) -> InRepoBackend | None:
    key = scheme_or_name.lower().replace("_", "-")
    head, plus, _ = key.partition("+")
    return _BY_KEY.get(key) or (_BY_KEY.get(head) if plus and head in _WRAPPERS else None)


def backend_name(scheme_or_name: str) -> str | None:
    """The in-repo backend a URL scheme or name belongs to (``"postgresql"`` -> ``"postgres"``,
    ``"encrypted+sqlite"`` -> ``"encrypted"``), or None."""
    row = _row(scheme_or_name)
    return None if row is None else row.name


def extra_for(scheme_or_name: str) -> str | None:
    """The meta-distribution extra that installs the backend of a URL scheme or backend name
    (``"postgresql"`` -> ``"postgres"``, ``"azblob"`` -> ``"azure-blob"``), or None for a
    backend this repository does not ship."""
    row = _row(scheme_or_name)
    return None if row is None else row.extra


def install_hint(scheme_or_name: str) -> str | None:
    """The ``pip install`` line for :func:`extra_for`'s extra, or None."""
    extra = extra_for(scheme_or_name)
    return None if extra is None else f"pip install 'chatkeep[{extra}]'"


def _closest(scheme: str, known: Iterable[str]) -> str | None:
    if scheme in known:
        return scheme
    close = difflib.get_close_matches(scheme, sorted(known), n=1, cutoff=0.6)
    return close[0] if close else None


def _fixed(url: str, known: frozenset[str]) -> str | None:
    head, plus, inner_url = url.partition("+")
    if plus and head.lower() in _WRAPPERS and ":" in inner_url:
        fixed_inner = _fixed(inner_url, known)  # encrypted+<inner URL>: fix the inner one
        return None if fixed_inner is None else f"{head.lower()}+{fixed_inner}"
    scheme, sep, rest = url.partition("://")
    if sep:
        lowered = scheme.lower()
        closest = _closest(lowered, known)
        if closest is None:
            return None
        if closest == "sqlite" and rest and not rest.startswith(("/", ":memory:")):
            return f"sqlite:///{rest}"  # sqlite://chats.db: the path needs its third slash
        return None if closest == scheme else f"{closest}://{rest}"
    short = _SHORT_URL.match(url)
    if short is not None and len(short["scheme"]) > 1:  # C:/x.db is a Windows path
        closest = _closest(short["scheme"].lower(), known)
        if closest is not None:
            rest = short["rest"]
            return f"sqlite:///{rest}" if closest == "sqlite" else f"{closest}://{rest}"
    return f"sqlite:///{url}"  # a bare path; an absolute one gets its fourth slash


def suggest_url(text: str, schemes: Iterable[str] = ()) -> str | None:
    """The store URL ``text`` probably meant, with its secrets hidden, or None when it looks
    right or nothing is close.

    ``schemes`` adds installed third-party schemes to the in-repo ones. Bare paths become
    SQLite URLs (``chats.db`` -> ``sqlite:///chats.db``), missing slashes are put back
    (``redis:/host`` -> ``redis://host``, ``sqlite://chats.db`` -> ``sqlite:///chats.db``) and
    misspelt schemes are corrected (``postgress://`` -> ``postgres://``).
    """
    text = text.strip()
    if not text:
        return None
    fixed = _fixed(text, _KNOWN_SCHEMES | {s.lower() for s in schemes})
    return None if fixed is None or fixed == text else redact_url(fixed)
