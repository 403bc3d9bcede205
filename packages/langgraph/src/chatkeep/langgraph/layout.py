"""Where a thread lives in a chatkeep store: session ids and record ids.

Per thread ``T`` and checkpoint namespace ``N`` (``""`` is the root graph; subgraphs get
their own), under the saver's ``prefix`` ``P``:

=====================  ==========================================================
``P<t>/``              the thread's index: one record per non-root namespace used
``P<t>/c/<n>``         the checkpoint log: per ``put``, one batch of blob records
                       (the channel values that changed) followed by one checkpoint
                       record (the checkpoint, its metadata and where each channel's
                       value is)
``P<t>/w/<n>/<c>``     the pending writes of checkpoint ``c``
``P<t>/t/<n>``         a rewrite in progress (``prune``, ``delete_for_runs``): the new
                       log, kept until the log is replaced, so a crash loses nothing
=====================  ==========================================================

``<t>``, ``<n>`` and ``<c>`` are the ids percent-encoded with nothing left unescaped but
``A-Z a-z 0-9 _ . - ~`` (so they contain no ``/`` and two distinct ids never meet), or,
when that is longer than :data:`MAX_COMPONENT`, ``!`` and a SHA-256 digest (``!`` never
appears in an encoded id). Listing the sessions starting with ``P<t>/`` finds every
session of a thread and no other thread's.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from urllib.parse import quote

from chatkeep.core.errors import InvalidOption
from chatkeep.core.records import MAX_SESSION_ID_LENGTH

__all__ = ["DEFAULT_PREFIX", "MAX_COMPONENT", "Layout", "ThreadKeys", "component"]

DEFAULT_PREFIX = "langgraph:"
#: Longest encoded id kept literally in a session or record id; longer ones are hashed.
MAX_COMPONENT = 120
MAX_PREFIX = 64
#: What an encoded id looks like (so a listing never mistakes another prefix's sessions).
_COMPONENT = re.compile(r"[A-Za-z0-9_.~%-]*|![0-9a-f]{64}")


def component(value: str) -> str:
    """``value`` as one path component: percent-encoded, or hashed when long."""
    encoded = quote(value, safe="")
    if len(encoded) <= MAX_COMPONENT:
        return encoded
    return "!" + hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True)
class ThreadKeys:
    """The session ids of one thread."""

    base: str  #: ``P<t>/``: also the thread's index session and its listing prefix

    @property
    def index(self) -> str:
        """The session listing the thread's non-root namespaces."""
        return self.base

    def log(self, checkpoint_ns: str) -> str:
        """The checkpoint log of one namespace."""
        return f"{self.base}c/{component(checkpoint_ns)}"

    def rewrite(self, checkpoint_ns: str) -> str:
        """Where a rewrite of that log is staged."""
        return f"{self.base}t/{component(checkpoint_ns)}"

    def writes(self, checkpoint_ns: str, checkpoint_id: str) -> str:
        """The pending writes of one checkpoint."""
        return f"{self.base}w/{component(checkpoint_ns)}/{component(checkpoint_id)}"


@dataclass(frozen=True)
class Layout:
    """Session naming for one saver prefix."""

    prefix: str = DEFAULT_PREFIX

    def __post_init__(self) -> None:
        if type(self.prefix) is not str or not self.prefix:
            raise InvalidOption("prefix must be a non-empty str")
        if len(self.prefix) > MAX_PREFIX or "\x00" in self.prefix or "/" in self.prefix:
            raise InvalidOption(
                f"prefix must be at most {MAX_PREFIX} characters, without NUL or '/'"
            )
        if not self.prefix.endswith(":"):
            # An encoded id never contains ':', so no prefix's sessions look like another's
            # (with "lg" and "lgx", thread "x..." of one would be a thread of the other).
            raise InvalidOption(f"prefix must end with ':' (got {self.prefix!r})")
        # The longest session id: prefix + thread + "/w/" + namespace + "/" + checkpoint.
        assert len(self.prefix) + 3 * (MAX_COMPONENT + 1) + 4 <= MAX_SESSION_ID_LENGTH

    def thread(self, thread_id: str) -> ThreadKeys:
        """The sessions of thread ``thread_id``."""
        return ThreadKeys(f"{self.prefix}{component(str(thread_id))}/")

    def parse(self, session_id: str) -> tuple[str, str] | None:
        """``(thread base, kind)`` of a session id of this layout (kind ``c``, ``w``,
        ``t`` or ``""`` for the index), or ``None`` for any other session."""
        if not session_id.startswith(self.prefix):
            return None
        parts = session_id[len(self.prefix) :].split("/")
        if not parts[0] or not all(_COMPONENT.fullmatch(part) for part in parts):
            return None
        kind, shape = parts[1:2], len(parts)
        if (kind == [""] and shape == 2) or (kind in (["c"], ["t"]) and shape == 3):
            return f"{self.prefix}{parts[0]}/", kind[0]
        if kind == ["w"] and shape == 4:
            return f"{self.prefix}{parts[0]}/", "w"
        return None


def checkpoint_record_id(checkpoint_id: str) -> str:
    """Record id of a checkpoint in its log."""
    return "c:" + component(checkpoint_id)


def blob_record_id(checkpoint_id: str, index: int) -> str:
    """Record id of the ``index``-th channel value stored with a checkpoint."""
    return f"b:{component(checkpoint_id)}:{index}"


def namespace_record_id(checkpoint_ns: str) -> str:
    """Record id of a namespace in the thread index."""
    return "n:" + component(checkpoint_ns)


def write_record_id(task_id: str, idx: int, unique: str | None = None) -> str:
    """Record id of one pending write (``unique`` for writes that replace earlier ones)."""
    base = f"w:{component(task_id)}:{idx}"
    return base if unique is None else f"{base}:{unique}"
