"""Re-encrypting a store under its primary key, in place, resumably.

After a new key is put first in the keyring (the old ones kept after it), records written
before still open with their old key ids. :func:`rotate` rewrites every session holding a
record sealed with another key (or, with ``allow_plaintext``, not sealed at all) so that
the old keys can be retired. The store stays append-only from the inside out, so a session
is rewritten by copy, never in place:

1. the session's records, re-sealed, are written to a temporary session
   (``chatkeep.tmp.rekey.<digest>``), read back and checked, then marked complete;
2. the session is erased and the re-sealed records appended to it, in slices (each append is
   idempotent, so an interrupted one is completed by running again);
3. the session is checked against the copy, and the copy erased.

Killed at any point, running :func:`rotate` again completes the work: a complete copy is
used to finish step 2, an incomplete one is dropped (the session is then still intact).
Record ids, order and count are unchanged, so forks and checkpoints keep working.

Run it while nothing else writes to the store: a session that changes while it is being
rotated is left as it is (and reported), never overwritten. A session holding a record the
keyring cannot open is left as it is too, listed in ``RotationReport.undecryptable``, and
the other sessions are rotated all the same. It needs the inner store's
``delete`` and ``list_sessions`` capabilities.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from chatkeep.core import Store, open_store
from chatkeep.core.backend import CapabilityMissing, Record

from .errors import DecryptionError
from .layout import MAGIC
from .store import EncryptedStore

__all__ = ["TEMP_PREFIX", "RotationReport", "rotate"]

#: Where copies in progress live (hidden from ``list_conversations`` like every
#: ``chatkeep.tmp.`` session).
TEMP_PREFIX = "chatkeep.tmp.rekey."
_DONE = "chatkeep.rekey.done"
_SLICE = 500


@dataclass
class RotationReport:
    """What :func:`rotate` did."""

    sessions_seen: int = 0
    sessions_rewritten: int = 0
    records_rewritten: int = 0
    sessions_current: int = 0
    copies_finished: int = 0
    copies_dropped: int = 0
    changed_during_rotation: list[str] = field(default_factory=list)
    #: Sessions holding a record the keyring cannot open (another key, damage): left as
    #: they were; the other sessions are rotated all the same.
    undecryptable: list[str] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        """Whether every session is now sealed with the primary key."""
        return not self.changed_during_rotation and not self.undecryptable


def rotate(
    store: Store | str,
    *,
    keys: object = None,
    prefix: str | None = None,
    progress: Callable[[str, RotationReport], None] | None = None,
) -> RotationReport:
    """Re-encrypt every session (starting with ``prefix``) under the primary key.

    ``store``: an open ``encrypted+...`` store, or its URL (opened with ``keys``).
    ``progress(session_id, report)`` is called after each session. Returns a
    :class:`RotationReport`; running it again after an interruption completes the work.
    """
    opened = open_store(store, keys=keys) if isinstance(store, str) else store
    try:
        wrapper = opened.backend
        if not isinstance(wrapper, EncryptedStore):
            raise TypeError("rotate() needs an encrypted store (open it as 'encrypted+<URL>')")
        return _Rotation(wrapper).run(prefix, progress)
    finally:
        if isinstance(store, str):
            opened.close()


class _Rotation:
    def __init__(self, wrapper: EncryptedStore) -> None:
        self.wrapper = wrapper
        self.inner = wrapper.inner
        self.cipher = wrapper.cipher
        self.report = RotationReport()
        for capability in ("delete", "list_sessions"):
            if not self.inner.supports(capability):
                raise CapabilityMissing(self.inner.name, capability)

    def run(
        self, prefix: str | None, progress: Callable[[str, RotationReport], None] | None
    ) -> RotationReport:
        # Finish or drop what an interrupted run left, before anything else.
        for temp in list(self.inner.list_sessions(TEMP_PREFIX)):
            self._resume(temp)
        for session_id in list(self.inner.list_sessions(prefix)):
            if session_id.startswith(TEMP_PREFIX):
                continue
            self.report.sessions_seen += 1
            self._rotate(session_id)
            if progress is not None:
                progress(session_id, self.report)
        return self.report

    # -- one session -----------------------------------------------------------------------

    def _stale(self, record: Record) -> bool:
        data = record.data
        if not data.startswith(MAGIC):
            return True  # plaintext (only readable with allow_plaintext)
        return self.cipher.key_id_of(data) != self.cipher.primary

    def _slices(self, session_id: str, stop: int | None = None) -> Iterator[list[Record]]:
        start = 0
        while stop is None or start < stop:
            end = start + _SLICE if stop is None else min(start + _SLICE, stop)
            chunk = self.inner.read(session_id, start, end)
            if not chunk:
                return
            yield chunk
            start += len(chunk)

    def _resealed(self, session_id: str, chunk: list[Record], start: int) -> list[Record]:
        # Opening through the wrapper checks every record (and honours allow_plaintext).
        plain = self.wrapper._open(session_id, chunk, start)
        return self.wrapper._seal(session_id, plain)

    def _rotate(self, session_id: str) -> None:
        temp = TEMP_PREFIX + hashlib.sha256(session_id.encode()).hexdigest()[:32]
        if not any(self._stale(r) for chunk in self._slices(session_id) for r in chunk):
            self.report.sessions_current += 1
            return
        self.inner.delete(temp)  # leftovers of a copy that never completed
        count, last = 0, None
        try:
            for chunk in self._slices(session_id):
                resealed = self._resealed(session_id, chunk, count)
                self.inner.append(temp, resealed)
                count += len(chunk)
                last = chunk[-1].id
        except DecryptionError:
            # Not this keyring's to rotate: report it, leave it intact, go on with the rest.
            self.inner.delete(temp)
            self.report.undecryptable.append(session_id)
            return
        marker = {"session": session_id, "count": count, "last": last}
        self.inner.append(temp, [Record(_DONE, json.dumps(marker).encode())])
        self._finish(temp, marker)

    def _resume(self, temp: str) -> None:
        tail = self.inner.read(temp, -1)
        if not tail or tail[0].id != _DONE:
            self.inner.delete(temp)  # an incomplete copy: its session was never touched
            self.report.copies_dropped += 1
            return
        marker = json.loads(tail[0].data)
        self.report.copies_finished += 1
        self._finish(temp, marker)

    def _finish(self, temp: str, marker: dict[str, object]) -> None:
        session_id = str(marker["session"])
        count = int(str(marker["count"]))
        copy_head = self.inner.read(temp, 0, 1)
        head = self.inner.read(session_id, 0, 1)
        if head and copy_head and head[0].data != copy_head[0].data:
            # The session still holds its old records: erase it only if it is exactly
            # what was copied (nothing was appended since).
            tail = self.inner.read(session_id, -1)
            if tail[0].id != marker["last"] or self.inner.read(session_id, count, count + 1):
                self.inner.delete(temp)
                self.report.changed_during_rotation.append(session_id)
                return
            self.inner.delete(session_id)
        written = 0
        for chunk in self._slices(temp, stop=count):
            self.inner.append(session_id, chunk)
            written += len(chunk)
        for start, chunk in enumerate(self._slices(temp, stop=count)):
            mine = self.inner.read(session_id, start * _SLICE, start * _SLICE + len(chunk))
            if mine != chunk:
                raise DecryptionError(
                    session_id, start * _SLICE, "rotation could not verify the rewritten log"
                )
        self.inner.delete(temp)
        self.report.sessions_rewritten += 1
        self.report.records_rewritten += written
