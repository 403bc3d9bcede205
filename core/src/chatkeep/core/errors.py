"""Typed errors raised by chatkeep.

Every error derives from :class:`ChatkeepError`, so ``except ChatkeepError`` catches all of
them. Messages say what was wrong and what to do; none ever includes a credential.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = [
    "AppendConflict",
    "CapabilityMissing",
    "ChatkeepError",
    "CorruptRecord",
    "EditOutOfRange",
    "EncodeError",
    "HistoryConflict",
    "InvalidExport",
    "InvalidMessage",
    "InvalidOption",
    "InvalidRecord",
    "InvalidSessionId",
    "MessageNotFound",
    "PluginError",
    "ReadOnlyStore",
    "RecordConflict",
    "SessionExists",
    "SessionMismatch",
    "SessionNotFound",
    "StoreClosed",
    "StoreNotFound",
    "StoreUnavailable",
    "ToolError",
    "ToolLoopLimit",
    "UnknownBackend",
    "VerificationFailed",
    "ViewError",
]


class ChatkeepError(Exception):
    """Base class of every error chatkeep raises on purpose."""


class InvalidSessionId(ChatkeepError, ValueError):
    """A session id was empty, too long, not a string, or contained NUL or unencodable text.

    Session ids are any non-empty ``str`` of at most 512 characters, without NUL, that
    encodes to UTF-8. The core rejects any other value before a backend sees it.
    """

    def __init__(self, session_id: object, reason: str) -> None:
        self.session_id = session_id
        self.reason = reason
        shown = repr(session_id)
        if len(shown) > 80:
            shown = shown[:77] + "..."
        super().__init__(f"invalid session id {shown}: {reason}")


class InvalidRecord(ChatkeepError, ValueError):
    """A record handed to ``append`` was malformed (id not a non-empty str, data not bytes,
    or an id repeated within one batch)."""


class InvalidMessage(ChatkeepError, ValueError):
    """A dict or JSON document is not a message chatkeep (or MAF) wrote: no
    ``"type": "message"``, a field of the wrong type, a damaged content.

    Raised by :func:`chatkeep.core.message_from_dict` and
    :func:`chatkeep.core.decode_message` (readers of a store turn it into
    :class:`CorruptRecord` naming the session and position). Build messages with
    :class:`chatkeep.core.Message`, or pass MAF's ``Message.to_dict()`` output.
    """


class EncodeError(ChatkeepError, TypeError, ValueError):
    """A value cannot be stored losslessly: a dict key that is not a ``str``, an object
    that is not JSON, bytes or a datetime, text that is not valid Unicode, or an ``extra``
    field that names a field the content models. Nothing was stored."""


class InvalidOption(ChatkeepError, ValueError, TypeError):
    """A store URL or option was malformed, unknown, of the wrong type or out of range.

    Every backend raises this (or a subclass) for bad configuration; the message names the
    option and what is accepted, and never shows a password.
    """


class RecordConflict(ChatkeepError, ValueError):
    """A record id already stored in the session was appended again with different data.

    An exact retry (same id, same data) is a no-op; reusing an id for other data would lose
    one of the two, so the whole batch is refused and nothing of it is stored.
    """

    def __init__(self, session_id: str, record_id: str) -> None:
        self.session_id = session_id
        self.record_id = record_id
        super().__init__(
            f"record id {record_id!r} is already stored in session {session_id!r} with "
            "different data; nothing of the batch was stored (give each record its own id)"
        )


class AppendConflict(ChatkeepError, RuntimeError):
    """A conditional append (``Store.append_if``) found the session's log changed since the
    caller read it: its last record is no longer ``expected``. Nothing was stored; read the
    session again and retry."""

    def __init__(self, session_id: str, expected: str | None) -> None:
        self.session_id = session_id
        self.expected = expected
        state = "empty" if expected is None else f"ending at record {expected!r}"
        super().__init__(
            f"session {session_id!r} changed since it was read (expected it {state}); "
            "nothing was stored: read it again and retry"
        )


class StoreClosed(ChatkeepError, RuntimeError):
    """The store handle was closed; open a new one with ``open_store``."""

    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(f"this {name!r} store handle is closed; open a new one")


class UnknownBackend(ChatkeepError, LookupError):
    """No installed backend has the requested name or URL scheme.

    The message names the extra that installs an in-repo backend (from the one table in
    :mod:`chatkeep.core.schemes`) and, for a mistyped URL, the URL that was probably meant.
    """

    def __init__(
        self,
        requested: str,
        installed: Iterable[str],
        *,
        given: str | None = None,
        suggestion: str | None = None,
    ) -> None:
        from .schemes import install_hint

        self.requested = requested
        self.installed = sorted(installed)
        self.suggestion = suggestion
        listed = f"(installed: {', '.join(self.installed) or 'none'})"
        if given is not None:
            message = f"{given!r} is not a store URL or an installed backend name {listed}"
        else:
            message = f"no chatkeep backend named {requested!r} is installed {listed}"
        if suggestion is not None:
            message += f"; did you mean {suggestion!r}?"
        hint = install_hint(requested if suggestion is None else suggestion.split(":", 1)[0])
        if hint is not None and suggestion is None:
            message += f"; install it with: {hint}"
        elif hint is not None and not self._is_installed(suggestion or ""):
            message += f" Install it with: {hint}"
        elif suggestion is None:
            message += (
                "; chatkeep ships no backend of that name: a third-party backend installs from "
                "its own distribution (`chatkeep backends` lists what is installed)"
            )
        super().__init__(message)

    def _is_installed(self, url: str) -> bool:
        from .schemes import backend_name

        return backend_name(url.split(":", 1)[0]) in self.installed


class PluginError(ChatkeepError):
    """A plugin could not be loaded or registered something invalid."""


class CorruptRecord(ChatkeepError, ValueError):
    """A stored record could not be decoded.

    Names the session and the record's position in its log so the record can be found and
    repaired; chatkeep never turns an undecodable record into a silent ``None``.
    """

    def __init__(
        self,
        session_id: str,
        position: int,
        reason: str,
        record_id: str | None = None,
    ) -> None:
        self.session_id = session_id
        self.position = position
        self.record_id = record_id
        self.reason = reason
        where = f"position {position}"
        if record_id is not None:
            where += f" (record id {record_id!r})"
        super().__init__(f"corrupt record in session {session_id!r} at {where}: {reason}")


class CapabilityMissing(ChatkeepError, NotImplementedError):
    """The backend does not offer an optional capability (delete, list_sessions, ttl, ...)."""

    def __init__(self, backend: str, capability: str) -> None:
        self.backend = backend
        self.capability = capability
        super().__init__(
            f"the {backend!r} backend does not support {capability!r}; "
            "pick a backend that declares it (see `chatkeep backends`)"
        )


class StoreUnavailable(ChatkeepError, ConnectionError):
    """The backend's service could not be reached after bounded retries.

    When raised from ``append``, the batch is either fully stored or not at all; retrying the
    same call is safe (same-batch retries are idempotent).
    """


class ReadOnlyStore(CapabilityMissing):
    """A write (``append``, ``append_if``, ``delete``, ...) on a handle opened read-only
    (``mode=ro``): nothing was written. A :class:`CapabilityMissing` (a read-only handle does
    not offer writing), raised by every backend that takes ``mode=ro``; backends may raise a
    subclass with more detail (``chatkeep.sqlite.ReadOnlyStore`` names the file).

    ``backend`` and ``operation`` (also ``capability``) say which handle refused what.
    """

    def __init__(self, backend: str, operation: str) -> None:
        super().__init__(backend, operation)
        self.operation = operation
        self.args = (backend, operation)  # what __init__ takes, so the error pickles

    def __str__(self) -> str:
        return (
            f"this {self.backend!r} store was opened read-only (mode=ro): {self.operation} is "
            "refused and nothing was written; open it without mode=ro to write"
        )


class StoreNotFound(StoreUnavailable):
    """The store to open does not exist, and the handle was asked not to create it (a
    read-only or ``mode=rw`` open of a missing SQLite file, say). Nothing was created. A
    :class:`StoreUnavailable`; the message names what is missing (never a secret).
    Backends may raise a subclass (``chatkeep.sqlite.DatabaseNotFound``)."""


class SessionNotFound(ChatkeepError, LookupError):
    """An operation that needs an existing session (``fork``, ``sessions show``) was given
    the id of a session that has no records."""

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        super().__init__(f"session {session_id!r} does not exist (it has no records)")


class SessionExists(ChatkeepError, ValueError):
    """A new session was requested under an id that already holds records."""

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        super().__init__(
            f"session {session_id!r} already exists; pick another id or leave it to chatkeep"
        )


class MessageNotFound(ChatkeepError, LookupError):
    """A message id (``fork(at=...)``) is not a record of the session or its fork ancestry."""

    def __init__(self, session_id: str, message_id: str) -> None:
        self.session_id = session_id
        self.message_id = message_id
        super().__init__(
            f"message {message_id!r} is not stored in session {session_id!r} "
            "(nor in the sessions it was forked from)"
        )


class EditOutOfRange(ChatkeepError, IndexError):
    """An in-place edit named a message position the view does not have (an
    ``IndexError``, as ``list.pop`` raises). Nothing was changed."""

    def __init__(self, session_id: str, index: int, length: int | None) -> None:
        self.session_id = session_id
        self.index = index
        self.length = length
        size = "fewer messages" if length is None else f"{length} message(s)"
        super().__init__(
            f"session {session_id!r} has no message at position {index} (its view has "
            f"{size}); nothing was changed"
        )


class ViewError(ChatkeepError, ValueError):
    """A log-view operation (undo, fork, delete with forks) cannot be done safely; the
    message says why. Nothing was changed."""


class ToolLoopLimit(ChatkeepError, RuntimeError):
    """The model kept asking for tools past the agent's ``max_tool_iterations``.

    Nothing of the turn was stored. Raise the limit, or check that the tools return what
    the model needs to finish.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        super().__init__(
            f"the model was still calling tools after {limit} rounds of tool calls "
            "(Agent(max_tool_iterations=...)); nothing of this turn was stored"
        )


class HistoryConflict(ChatkeepError, RuntimeError):
    """Local and service-side history disagree about who keeps the conversation: the agent
    has a history provider but the service returned a conversation id (and the agent's
    ``conflict_policy`` is ``"raise"``), or a session the service keeps is continued with a
    client that keeps nothing there (``service_managed = False``)."""


class ToolError(ChatkeepError):
    """A tool call could not be made (bad arguments); reported to the model as the call's
    exception, so it can correct itself."""


class InvalidExport(ChatkeepError, ValueError):
    """An export being imported (``chatkeep.core.transfer.import_jsonl``) is not one this
    chatkeep reads: no header, an unknown format version, a line that is not a record, a
    gap in a session's records, or a file cut short (no end line, or counts that disagree).

    ``line`` is the 1-based number of the offending line. The records of the lines before
    it are stored (``records_stored`` of them were new); nothing of that line or after it
    is. Importing the repaired or re-exported file again skips what is stored already.
    """

    def __init__(self, line: int, reason: str, records_stored: int = 0) -> None:
        self.line = line
        self.reason = reason
        self.records_stored = records_stored
        super().__init__(
            f"line {line} of the export: {reason}. The records of the lines before it are "
            f"stored ({records_stored} new), nothing of this line or after it; import the "
            "repaired or re-exported file again (what is stored already is skipped)"
        )


@dataclass(frozen=True)
class SessionMismatch:
    """A session that differs between the two stores of a migration
    (``chatkeep.core.transfer.verify``): its record counts and content digests (hex
    BLAKE2b over the record ids and data, in log order) on each side."""

    session_id: str
    source_count: int
    destination_count: int
    source_digest: str
    destination_digest: str


def _mismatch_text(mismatch: SessionMismatch) -> str:
    source, destination = mismatch.source_count, mismatch.destination_count
    counts = (
        f"{source} record{'' if source == 1 else 's'} in the source, "
        f"{destination} in the destination"
    )
    if mismatch.source_count == mismatch.destination_count:
        counts += ", other content"
    return f"{mismatch.session_id!r} ({counts})"


class VerificationFailed(ChatkeepError, RuntimeError):
    """After a migration, some sessions differ between the source and the destination
    (``mismatches``, one :class:`SessionMismatch` each). Nothing was deleted on either
    side; a source written to during the copy is the usual cause: run the migration again
    (it continues where the destination stops) once writers are stopped."""

    def __init__(self, mismatches: Sequence[SessionMismatch]) -> None:
        self.mismatches = list(mismatches)
        shown = ", ".join(_mismatch_text(m) for m in self.mismatches[:5])
        more = len(self.mismatches) - 5
        if more > 0:
            shown += f" and {more} more"
        count = len(self.mismatches)
        super().__init__(
            f"{count} session{'s' if count != 1 else ''} differ{'s' if count == 1 else ''} "
            f"between the source and the destination after the copy: {shown}"
        )
