"""The checkpointer's algorithms over the store contract, written once for sync and async.

Every public method of :class:`Engine` returns a generator of store requests (see
:mod:`chatkeep.langgraph.ops`). The record layout is described in
:mod:`chatkeep.langgraph.layout`; the costs it buys are in the package README.
"""

from __future__ import annotations

import random
import threading
import uuid
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any, cast

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    PendingWrite,
    get_checkpoint_metadata,
    writes_sort_key,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

from chatkeep.core import Store
from chatkeep.core.errors import (
    AppendConflict,
    CapabilityMissing,
    CorruptRecord,
    InvalidOption,
    RecordConflict,
)
from chatkeep.core.records import Record

from .errors import InvalidConfig
from .framing import (
    Blob,
    Entry,
    Stored,
    Write,
    decode,
    encode_blob,
    encode_checkpoint,
    encode_namespace,
    encode_write,
)
from .layout import (
    Layout,
    ThreadKeys,
    blob_record_id,
    checkpoint_record_id,
    namespace_record_id,
    write_record_id,
)
from .ops import Append, AppendIf, Delete, Emit, ListSessions, Read, Steps

__all__ = ["Engine", "next_version"]

#: Records read first when loading a thread's latest checkpoint: the checkpoint record and
#: the values its ``put`` stored just before it (LangGraph changes a few channels a step).
TAIL = 4
#: Largest slice read while walking a log backward (the walk starts at TAIL and doubles).
MAX_WINDOW = 64
#: Positions closer than this are read in one slice when resolving channel values.
GAP = 2
#: How many chunks a listed checkpoint waits for its values to turn up in the walk before
#: they are fetched by position.
PATIENCE = 2
#: Slices walked back from the end before a lookup by id bisects the log instead.
BISECT_AFTER = 2
#: Records read at each probe of the bisection (a put's values, then its checkpoint).
PROBE = 4
MAX_PROBES = 64
#: Attempts of a conditional append before giving up (each re-reads one record).
MAX_ATTEMPTS = 64
STORED_CACHE = 512
#: ``Entry`` record id for a channel whose value is known to be empty.
EMPTY = ""


def next_version(current: str | int | float | None) -> str:
    """A channel version greater than ``current``, unique with overwhelming probability.

    The integer part orders versions; the random fraction keeps two branches that both
    continue from one checkpoint (time travel, concurrent runs) from minting the same
    version of a channel with different values.
    """
    if current is None:
        number = 0
    elif isinstance(current, (int, float)):
        number = int(current)
    else:
        number = int(str(current).split(".", 1)[0])
    return f"{number + 1:032}.{random.random():016}"


def _where(config: RunnableConfig) -> tuple[str, str, str | None]:
    configurable = config.get("configurable") or {}
    thread_id = configurable.get("thread_id")
    if thread_id is None or thread_id == "":
        raise InvalidConfig(
            "the config has no configurable.thread_id: pass "
            '{"configurable": {"thread_id": "..."}} when invoking the graph'
        )
    checkpoint_ns = configurable.get("checkpoint_ns") or ""
    checkpoint_id = configurable.get("checkpoint_id") or None
    return str(thread_id), str(checkpoint_ns), checkpoint_id


class _Backward:
    """Walks a log from its end toward its start, in slices, newest record first.

    Slices are addressed from the end (``read(-k-w, -k)``), so records appended during the
    walk shift them: the walk recognises the records it has already returned at the top of
    a slice and moves further down, so nothing is returned twice or skipped.
    """

    def __init__(self, session_id: str, window: int = TAIL) -> None:
        self.session_id = session_id
        self.window = window
        self.taken = 0  # records returned so far
        self.shift = 0  # records appended since the walk began (as far as seen)
        self.seen: set[str] = set()
        self.done = False

    def more(self) -> Steps[list[Record]]:
        """The next older records (newest first); ``[]`` once the start is reached."""
        while not self.done:
            width = self.window
            high = self.taken + self.shift
            chunk: list[Record] = yield Read(self.session_id, -(high + width), -high or None)
            self.window = min(width * 2, MAX_WINDOW)
            if len(chunk) < width:
                self.done = True  # the slice reached the first record
            fresh = len(chunk)
            while fresh and chunk[fresh - 1].id in self.seen:
                fresh -= 1
            self.shift += len(chunk) - fresh
            if not fresh:
                continue
            new = chunk[:fresh]
            self.taken += fresh
            self.seen.update(record.id for record in new)
            new.reverse()
            return new
        return []


class _Log:
    """One log read whole: its checkpoints in order and its values by record id."""

    def __init__(self, session_id: str, records: list[Record]) -> None:
        self.session_id = session_id
        self.records = records
        self.stored: list[Stored] = []
        self.blobs: dict[str, Blob] = {}
        for position, record in enumerate(records):
            item = decode(session_id, record, position)
            if isinstance(item, Stored):
                self.stored.append(item)
            elif isinstance(item, Blob):
                self.blobs[item.record_id] = item

    def resolve(self, stored: Stored) -> dict[str, tuple[Any, Blob | None]]:
        """Channel -> (version, value record or None for empty), from this log alone."""
        result: dict[str, tuple[Any, Blob | None]] = {}
        for channel, (version, _position, record_id) in stored.entries.items():
            if record_id == EMPTY:
                result[channel] = (version, None)
            elif record_id is None:
                found = _search(self.blobs.values(), channel, version)
                if found is not None:
                    result[channel] = (version, found)
            elif record_id in self.blobs:
                result[channel] = (version, self.blobs[record_id])
            else:
                raise CorruptRecord(
                    self.session_id,
                    stored.position,
                    f"the value of channel {channel!r} (record {record_id!r}) is missing",
                    stored.record_id,
                )
        return result


def _search(blobs: Iterable[Blob], channel: str, version: Any) -> Blob | None:
    found = None
    for blob in blobs:
        if blob.channel == channel and blob.version == version:
            found = blob  # the latest one wins
    return found


class Engine:
    """The saver's state (caches) and its operations as request generators."""

    def __init__(self, store: Store, serde: SerializerProtocol, layout: Layout) -> None:
        self.store = store
        self.serde = serde
        self.layout = layout
        self._lock = threading.Lock()
        # log session -> (id of its last record, position of the next record)
        self._tails: dict[str, tuple[str | None, int]] = {}
        # (log session, checkpoint record id) -> Stored
        self._stored: OrderedDict[tuple[str, str], Stored] = OrderedDict()
        # (thread base, namespace) registered in the thread index by this process
        self._registered: set[tuple[str, str]] = set()

    # -- capabilities ------------------------------------------------------------------

    @property
    def conditional(self) -> bool:
        return self.store.supports("conditional")

    def _require(self, capability: str) -> None:
        if not self.store.supports(capability):
            raise CapabilityMissing(self.store.name, capability)

    # -- caches ------------------------------------------------------------------------

    def _remember(self, log: str, stored: Stored) -> None:
        with self._lock:
            key = (log, stored.record_id)
            self._stored[key] = stored
            self._stored.move_to_end(key)
            while len(self._stored) > STORED_CACHE:
                self._stored.popitem(last=False)

    def _cached(self, log: str, record_id: str) -> Stored | None:
        with self._lock:
            return self._stored.get((log, record_id))

    def _forget(self, base: str) -> None:
        """Drop everything cached about the thread whose sessions start with ``base``."""
        with self._lock:
            for log in [log for log in self._tails if log.startswith(base)]:
                del self._tails[log]
            for key in [key for key in self._stored if key[0].startswith(base)]:
                del self._stored[key]
            self._registered = {item for item in self._registered if item[0] != base}

    # -- reading -----------------------------------------------------------------------

    def _tail_state(self, keys: ThreadKeys, checkpoint_ns: str) -> Steps[tuple[str | None, int]]:
        """(last record id, next position) of a log, read from the store."""
        log = keys.log(checkpoint_ns)
        last: list[Record] = yield Read(log, -1)
        if not last:
            recovered = yield from self._recover(keys, checkpoint_ns)
            if not recovered:
                return None, 0
            last = yield Read(log, -1)
        item = decode(log, last[0])
        if isinstance(item, Stored):
            return last[0].id, item.position + 1
        # Not a checkpoint record last (a log written by hand?): count back to one.
        walk = _Backward(log, MAX_WINDOW)
        after = 0
        while chunk := (yield from walk.more()):
            for record in chunk:
                found = decode(log, record)
                if isinstance(found, Stored):
                    return last[0].id, found.position + 1 + after
                after += 1
        return last[0].id, after

    def _recover(self, keys: ThreadKeys, checkpoint_ns: str) -> Steps[bool]:
        """Finish a rewrite that stopped after erasing the old log (see :meth:`_rewrite`)."""
        if not self.store.supports("delete"):
            return False
        staged: list[Record] = yield Read(keys.rewrite(checkpoint_ns))
        if not staged:
            return False
        yield Append(keys.log(checkpoint_ns), staged)
        yield Delete(keys.rewrite(checkpoint_ns))
        return True

    def _find(
        self, keys: ThreadKeys, checkpoint_ns: str, checkpoint_id: str
    ) -> Steps[Stored | None]:
        """The stored checkpoint ``checkpoint_id`` of a log, or None.

        Recent checkpoints are found walking back from the end; older ones by bisecting
        the log on checkpoint ids (LangGraph's ids grow with time, and the log keeps them
        in order unless writers raced or a thread was copied into a non-empty one), and
        failing that by walking the rest of the log.
        """
        log = keys.log(checkpoint_ns)
        record_id = checkpoint_record_id(checkpoint_id)
        cached = self._cached(log, record_id)
        if cached is not None:
            return cached
        walk = _Backward(log)
        first = True
        newest: Stored | None = None
        slices = 0
        while True:
            chunk = yield from walk.more()
            if not chunk:
                if first and (yield from self._recover(keys, checkpoint_ns)):
                    walk = _Backward(log)
                    first = False
                    continue
                return None
            first = False
            slices += 1
            for record in chunk:
                if not record.id.startswith("c:"):
                    continue
                item = decode(log, record)
                if not isinstance(item, Stored):
                    raise CorruptRecord(log, -1, "a checkpoint id names a value", record.id)
                if record.id == record_id:
                    self._remember(log, item)
                    return item
                newest = newest or item
            if slices == BISECT_AFTER and newest is not None:
                if newest.checkpoint_id < checkpoint_id:
                    continue  # newer than the newest: only a disordered log has it
                found = yield from self._bisect(log, checkpoint_id, newest.position)
                if found is not None:
                    self._remember(log, found)
                    return found

    def _bisect(self, log: str, checkpoint_id: str, stop: int) -> Steps[Stored | None]:
        """Binary search of positions ``[0, stop)`` for a checkpoint, by id order."""
        low, high = 0, stop
        for _probe in range(MAX_PROBES):
            if low >= high:
                return None
            middle = (low + high) // 2
            found: Stored | None = None
            position = middle
            for width in (PROBE, MAX_WINDOW):  # values first, then their checkpoint
                chunk: list[Record] = yield Read(log, position, position + width)
                for index, record in enumerate(chunk):
                    if record.id.startswith("c:"):
                        item = decode(log, record, position + index)
                        if isinstance(item, Stored):
                            found, position = item, position + index
                            break
                if found is not None or len(chunk) < width:
                    break
                position += width
            if found is None:
                return None
            if found.checkpoint_id == checkpoint_id:
                return found
            if found.checkpoint_id < checkpoint_id:
                low = position + 1
            else:
                high = middle
        return None

    def _latest(
        self, keys: ThreadKeys, checkpoint_ns: str
    ) -> Steps[tuple[Stored, dict[str, Blob]] | None]:
        """The last checkpoint of a log and the values read with it."""
        log = keys.log(checkpoint_ns)
        tail: list[Record] = yield Read(log, -TAIL)
        if not tail:
            if not (yield from self._recover(keys, checkpoint_ns)):
                with self._lock:
                    self._tails[log] = (None, 0)
                return None
            tail = yield Read(log, -TAIL)
        known: dict[str, Blob] = {}
        latest: Stored | None = None
        for record in reversed(tail):
            item = decode(log, record)
            if isinstance(item, Blob):
                known[item.record_id] = item
            elif isinstance(item, Stored) and latest is None:
                latest = item
        if latest is None:  # more values than TAIL after the last checkpoint: walk on
            walk = _Backward(log, MAX_WINDOW)
            walk.taken, walk.seen = len(tail), {record.id for record in tail}
            while latest is None:
                chunk = yield from walk.more()
                if not chunk:
                    return None
                for record in chunk:
                    item = decode(log, record)
                    if isinstance(item, Stored):
                        latest = item
                        break
        last = decode(log, tail[-1])
        if isinstance(last, Stored):
            with self._lock:
                self._tails[log] = (tail[-1].id, last.position + 1)
        self._remember(log, latest)
        return latest, known

    def _values(self, log: str, stored: Stored, known: dict[str, Blob]) -> Steps[dict[str, Any]]:
        """The channel values of a stored checkpoint (deserialized)."""
        found: dict[str, Blob] = {}
        wanted: dict[str, tuple[str, int]] = {}  # record id -> (channel, position hint)
        searched: dict[str, Any] = {}  # channel -> version, location unknown
        for channel, (version, position, record_id) in stored.entries.items():
            if record_id == EMPTY:
                continue
            if record_id is None:
                searched[channel] = version
            elif record_id in known:
                found[channel] = known[record_id]
            else:
                wanted[record_id] = (channel, position)
        if wanted:
            for start, stop in _ranges(sorted({p for _c, p in wanted.values() if p >= 0})):
                chunk: list[Record] = yield Read(log, start, stop)
                for record in chunk:
                    if record.id in wanted:
                        blob = decode(log, record)
                        if isinstance(blob, Blob):
                            found[wanted.pop(record.id)[0]] = blob
        if wanted or searched:
            # A position was only a hint (no conditional appends, or a rewrite): search.
            walk = _Backward(log, MAX_WINDOW)
            while (wanted or searched) and (chunk := (yield from walk.more())):
                for record in chunk:
                    if record.id in wanted:
                        blob = decode(log, record)
                        if isinstance(blob, Blob):
                            found[wanted.pop(record.id)[0]] = blob
                    elif searched and record.id.startswith("b:"):
                        blob = decode(log, record)
                        if isinstance(blob, Blob) and searched.get(blob.channel) == blob.version:
                            del searched[blob.channel]
                            found[blob.channel] = blob
            if wanted:
                record_id, (channel, _p) = next(iter(wanted.items()))
                raise CorruptRecord(
                    log,
                    stored.position,
                    f"the value of channel {channel!r} (record {record_id!r}) is missing",
                    stored.record_id,
                )
        return {channel: self.serde.loads_typed(blob.value) for channel, blob in found.items()}

    def _writes(
        self, keys: ThreadKeys, checkpoint_ns: str, checkpoint_id: str
    ) -> Steps[list[PendingWrite]]:
        session = keys.writes(checkpoint_ns, checkpoint_id)
        records: list[Record] = yield Read(session)
        return self._decode_writes(session, records)

    def _decode_writes(self, session: str, records: list[Record]) -> list[PendingWrite]:
        latest: dict[tuple[str, int], Write] = {}
        for position, record in enumerate(records):
            item = decode(session, record, position)
            if not isinstance(item, Write):
                raise CorruptRecord(session, position, "not a pending write", record.id)
            key = (item.task_id, item.idx)
            if item.idx < 0 or key not in latest:  # special writes replace, others stay
                latest[key] = item
        ordered = sorted(
            latest.values(), key=lambda w: writes_sort_key(w.task_path, w.task_id, w.idx)
        )
        return [(w.task_id, w.channel, self.serde.loads_typed(w.value)) for w in ordered]

    def _tuple(
        self, stored: Stored, values: dict[str, Any], writes: list[PendingWrite]
    ) -> CheckpointTuple:
        checkpoint = cast(
            Checkpoint, {**self.serde.loads_typed(stored.checkpoint), "channel_values": values}
        )
        where = {"thread_id": stored.thread_id, "checkpoint_ns": stored.checkpoint_ns}
        parent: RunnableConfig | None = None
        if stored.parent_id:
            parent = {"configurable": {**where, "checkpoint_id": stored.parent_id}}
        return CheckpointTuple(
            config={"configurable": {**where, "checkpoint_id": stored.checkpoint_id}},
            checkpoint=checkpoint,
            metadata=cast(CheckpointMetadata, self.serde.loads_typed(stored.metadata)),
            parent_config=parent,
            pending_writes=writes,
        )

    def get_tuple(self, config: RunnableConfig) -> Steps[CheckpointTuple | None]:
        """``BaseCheckpointSaver.get_tuple``."""
        thread_id, checkpoint_ns, checkpoint_id = _where(config)
        keys = self.layout.thread(thread_id)
        log = keys.log(checkpoint_ns)
        known: dict[str, Blob] = {}
        if checkpoint_id is None:
            latest = yield from self._latest(keys, checkpoint_ns)
            if latest is None:
                return None
            stored, known = latest
        else:
            found = yield from self._find(keys, checkpoint_ns, checkpoint_id)
            if found is None:
                return None
            stored = found
        values = yield from self._values(log, stored, known)
        writes = yield from self._writes(keys, checkpoint_ns, stored.checkpoint_id)
        return self._tuple(stored, values, writes)

    def _namespaces(self, keys: ThreadKeys) -> Steps[list[str]]:
        """The thread's namespaces, the root one first."""
        records: list[Record] = yield Read(keys.index)
        names = [""]
        for position, record in enumerate(records):
            item = decode(keys.index, record, position)
            if isinstance(item, str) and item not in names:
                names.append(item)
        return names

    def _all_logs(self) -> Steps[list[tuple[ThreadKeys, str]]]:
        """Every checkpoint log under the prefix (needs ``list_sessions``)."""
        self._require("list_sessions")
        sessions: list[str] = yield ListSessions(self.layout.prefix)
        logs: list[tuple[ThreadKeys, str]] = []
        for session in sessions:
            parsed = self.layout.parse(session)
            if parsed is not None and parsed[1] == "c":
                logs.append((ThreadKeys(parsed[0]), session))
        return logs

    def checkpoints(
        self,
        config: RunnableConfig | None,
        *,
        filter: Mapping[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Steps[None]:
        """``BaseCheckpointSaver.list``: emits tuples, newest first, and stops at ``limit``."""
        if limit is not None and limit <= 0:
            return
        logs: list[tuple[ThreadKeys, str | None, str]]
        only: str | None = None
        if config is None:
            logs = [(keys, None, log) for keys, log in (yield from self._all_logs())]
        else:
            thread_id, _ns, only = _where(config)
            keys = self.layout.thread(thread_id)
            asked = (config.get("configurable") or {}).get("checkpoint_ns")
            names = [str(asked)] if asked is not None else (yield from self._namespaces(keys))
            logs = [(keys, name, keys.log(name)) for name in names]
        before_id = ((before or {}).get("configurable") or {}).get("checkpoint_id")
        conditions = dict(filter or {})

        def wanted(stored: Stored) -> bool:
            if before_id is not None and stored.checkpoint_id >= before_id:
                return False
            if conditions:
                metadata = self.serde.loads_typed(stored.metadata)
                return all(metadata.get(k) == v for k, v in conditions.items())
            return True

        budget = [limit]
        for keys, name, log in logs:
            if only is not None and name is not None:
                found = yield from self._find(keys, name, only)
                if found is None or not wanted(found):
                    continue
                if (yield from self._emit(keys, log, found, {}, budget)):
                    return
                continue
            if (yield from self._walk(keys, log, wanted, budget)):
                return

    def _emit(
        self,
        keys: ThreadKeys,
        log: str,
        stored: Stored,
        known: dict[str, Blob],
        budget: list[int | None],
    ) -> Steps[bool]:
        """Emit one listed tuple; True once ``budget`` (the remaining limit) is used up."""
        values = yield from self._values(log, stored, known)
        writes = yield from self._writes(keys, stored.checkpoint_ns, stored.checkpoint_id)
        yield Emit(self._tuple(stored, values, writes))
        if budget[0] is None:
            return False
        budget[0] -= 1
        return budget[0] <= 0

    def _walk(
        self,
        keys: ThreadKeys,
        log: str,
        wanted: Callable[[Stored], bool],
        budget: list[int | None],
    ) -> Steps[bool]:
        """Emit a log's wanted checkpoints, newest first, reading only as far as needed.

        A checkpoint's values are stored before it, so a listed checkpoint waits (up to
        PATIENCE slices) for the walk to reach them before they are fetched by position.
        """
        walk = _Backward(log)
        known: dict[str, Blob] = {}
        pending: deque[tuple[Stored, int]] = deque()
        chunks = 0
        exhausted = False
        while not exhausted or pending:
            if not exhausted:
                chunk = yield from walk.more()
                chunks += 1
                exhausted = not chunk
                for record in chunk:
                    item = decode(log, record)
                    if isinstance(item, Blob):
                        known[item.record_id] = item
                    elif isinstance(item, Stored) and wanted(item):
                        pending.append((item, chunks))
            while pending and (
                exhausted or chunks - pending[0][1] >= PATIENCE or _ready(pending[0][0], known)
            ):
                stored, _when = pending.popleft()
                if (yield from self._emit(keys, log, stored, known, budget)):
                    return True
        return False

    # -- writing -----------------------------------------------------------------------

    def _is_registered(self, keys: ThreadKeys, draft: Stored) -> bool:
        with self._lock:
            return (keys.base, draft.checkpoint_ns) in self._registered

    def _register(self, keys: ThreadKeys, checkpoint_ns: str) -> Steps[None]:
        """Note a non-root namespace in the thread index: by the first checkpoint of its
        log, and once per process after that (a repeat is a no-op for the store)."""
        if not checkpoint_ns:
            return
        record = encode_namespace(namespace_record_id(checkpoint_ns), checkpoint_ns)
        yield Append(keys.index, [record])
        with self._lock:
            self._registered.add((keys.base, checkpoint_ns))

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> Steps[RunnableConfig]:
        """``BaseCheckpointSaver.put``: one append of the changed values + the checkpoint."""
        thread_id, checkpoint_ns, parent_id = _where(config)
        keys = self.layout.thread(thread_id)
        log = keys.log(checkpoint_ns)
        checkpoint_id = str(checkpoint["id"])
        record_id = checkpoint_record_id(checkpoint_id)

        values = checkpoint["channel_values"]
        versions = checkpoint["channel_versions"]
        bare = {k: v for k, v in checkpoint.items() if k != "channel_values"}
        blobs: list[Blob] = []
        own: dict[str, int | None] = {}  # channel -> index in blobs, None when emptied
        for channel, version in new_versions.items():
            if channel in values:
                own[channel] = len(blobs)
                blobs.append(
                    Blob(
                        blob_record_id(checkpoint_id, len(blobs)),
                        channel,
                        version,
                        self.serde.dumps_typed(values[channel]),
                    )
                )
            else:
                own[channel] = None
        inherited: dict[str, Entry] = {}
        if parent_id is not None and any(ch not in own for ch in versions):
            parent = yield from self._find(keys, checkpoint_ns, parent_id)
            if parent is not None:
                inherited = parent.entries
        full_metadata = get_checkpoint_metadata(config, metadata)
        run_id = full_metadata.get("run_id")
        draft = Stored(
            record_id=record_id,
            checkpoint_id=checkpoint_id,
            position=-1,
            parent_id=parent_id,
            thread_id=thread_id,
            checkpoint_ns=checkpoint_ns,
            run_id=None if run_id is None else str(run_id),
            checkpoint=self.serde.dumps_typed(bare),
            metadata=self.serde.dumps_typed(full_metadata),
            entries={},
        )
        placement = _Placement(versions, own, inherited, blobs)
        stored = yield from self._commit(keys, draft, placement)
        self._remember(log, stored)
        return {
            "configurable": {
                "thread_id": thread_id,
                "checkpoint_ns": checkpoint_ns,
                "checkpoint_id": checkpoint_id,
            }
        }

    def _commit(self, keys: ThreadKeys, draft: Stored, placement: _Placement) -> Steps[Stored]:
        """Append a checkpoint's batch after the log's last record, retrying (with fresh
        positions) when another writer got there first."""
        log = keys.log(draft.checkpoint_ns)
        for _attempt in range(MAX_ATTEMPTS):
            with self._lock:
                tail = self._tails.get(log)
            if tail is None:
                tail = yield from self._tail_state(keys, draft.checkpoint_ns)
            last_id, start = tail
            if draft.checkpoint_ns and (start == 0 or not self._is_registered(keys, draft)):
                yield from self._register(keys, draft.checkpoint_ns)
            stored = replace(
                draft,
                position=start + len(placement.blobs),
                entries=placement.entries(start),
            )
            batch = [*(encode_blob(b) for b in placement.blobs), encode_checkpoint(stored)]
            try:
                if self.conditional:
                    yield AppendIf(log, batch, after=last_id)
                else:
                    yield Append(log, batch)
            except AppendConflict:
                with self._lock:
                    self._tails.pop(log, None)
                fresh = yield from self._tail_state(keys, draft.checkpoint_ns)
                if fresh[0] == draft.record_id:  # our own earlier attempt did land
                    return stored
                with self._lock:
                    self._tails[log] = fresh
                continue
            except RecordConflict:
                # This checkpoint was stored before (an acknowledgement lost, then others
                # appended): the same checkpoint is a success, another one an error.
                with self._lock:
                    self._tails.pop(log, None)
                existing = yield from self._find(keys, draft.checkpoint_ns, draft.checkpoint_id)
                if (
                    existing is None
                    or existing.checkpoint != draft.checkpoint
                    or existing.metadata != draft.metadata
                ):
                    raise
                return existing
            with self._lock:
                self._tails[log] = (draft.record_id, stored.position + 1)
            return stored
        raise AppendConflict(log, None)

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> Steps[None]:
        """``BaseCheckpointSaver.put_writes``: one append to the checkpoint's writes."""
        thread_id, checkpoint_ns, checkpoint_id = _where(config)
        if checkpoint_id is None:
            raise InvalidConfig("put_writes needs configurable.checkpoint_id")
        session = self.layout.thread(thread_id).writes(checkpoint_ns, checkpoint_id)
        batch: list[Record] = []
        for position, (channel, value) in enumerate(writes):
            idx = WRITES_IDX_MAP.get(channel, position)
            # A special write (error, interrupt, ...) replaces the task's earlier one: give
            # it an id of its own; the newest wins on read. Others keep the first stored.
            unique = uuid.uuid4().hex[:16] if idx < 0 else None
            batch.append(
                encode_write(
                    Write(
                        write_record_id(str(task_id), idx, unique),
                        str(task_id),
                        idx,
                        channel,
                        self.serde.dumps_typed(value),
                        task_path,
                    )
                )
            )
        for _attempt in range(MAX_ATTEMPTS):
            if not batch:
                return
            try:
                yield Append(session, batch)
                return
            except RecordConflict:
                # The task's write at that index is already stored with another value:
                # LangGraph keeps the first one; store the rest.
                stored: list[Record] = yield Read(session)
                present = {record.id for record in stored}
                batch = [record for record in batch if record.id not in present]
        raise AppendConflict(session, None)

    # -- thread operations ---------------------------------------------------------------

    def delete_thread(self, thread_id: str) -> Steps[None]:
        """``BaseCheckpointSaver.delete_thread``: erases every session of the thread."""
        self._require("delete")
        keys = self.layout.thread(str(thread_id))
        self._forget(keys.base)
        if self.store.supports("list_sessions"):
            sessions: list[str] = yield ListSessions(keys.base)
            for session in sessions:
                yield Delete(session)
            return
        names = yield from self._namespaces(keys)
        for name in names:
            log = keys.log(name)
            records: list[Record] = yield Read(log)
            for position, record in enumerate(records):
                if record.id.startswith("c:"):
                    item = decode(log, record, position)
                    if isinstance(item, Stored):
                        yield Delete(keys.writes(name, item.checkpoint_id))
            yield Delete(log)
            yield Delete(keys.rewrite(name))
        yield Delete(keys.index)  # last: a re-run after a crash still finds the rest

    def _rewrite(self, keys: ThreadKeys, checkpoint_ns: str, records: list[Record]) -> Steps[None]:
        """Replace a log by ``records``, crash-safely: staged in full first, so a log found
        empty with a staged copy is completed by the next reader (:meth:`_recover`)."""
        log, staged = keys.log(checkpoint_ns), keys.rewrite(checkpoint_ns)
        self._forget(log)
        if not records:
            yield Delete(log)
            return
        yield Delete(staged)
        yield Append(staged, records)
        yield Delete(log)
        yield Append(log, records)
        yield Delete(staged)
        self._forget(log)

    def _drop(
        self, keys: ThreadKeys, checkpoint_ns: str, predicate: Callable[[Stored, _Log], bool]
    ) -> Steps[None]:
        """Remove the checkpoints ``predicate`` selects from one log (and their writes)."""
        log = keys.log(checkpoint_ns)
        records: list[Record] = yield Read(log)
        if not records:
            return
        whole = _Log(log, records)
        removed = [stored for stored in whole.stored if predicate(stored, whole)]
        if not removed:
            return
        gone = {stored.record_id for stored in removed}
        kept = [stored for stored in whole.stored if stored.record_id not in gone]
        yield from self._rewrite(keys, checkpoint_ns, _repack(kept, whole.resolve, 0))
        for stored in removed:
            yield Delete(keys.writes(checkpoint_ns, stored.checkpoint_id))

    def prune(self, thread_ids: Sequence[str], strategy: str = "keep_latest") -> Steps[None]:
        """``BaseCheckpointSaver.prune``: ``keep_latest`` keeps each namespace's last
        checkpoint (made self-contained), ``delete`` erases the threads."""
        if strategy not in ("keep_latest", "delete"):
            raise InvalidOption(
                f"unknown prune strategy {strategy!r}: use 'keep_latest' or 'delete'"
            )
        self._require("delete")
        for thread_id in thread_ids:
            if strategy == "delete":
                yield from self.delete_thread(thread_id)
                continue
            keys = self.layout.thread(str(thread_id))
            names = yield from self._namespaces(keys)
            for name in names:
                yield from self._drop(
                    keys, name, lambda stored, whole: stored is not whole.stored[-1]
                )

    def delete_for_runs(self, run_ids: Sequence[str]) -> Steps[None]:
        """``BaseCheckpointSaver.delete_for_runs`` (needs ``list_sessions`` and ``delete``)."""
        runs = {str(run_id) for run_id in run_ids}
        if not runs:
            return
        self._require("delete")
        logs = yield from self._all_logs()
        for keys, log in logs:
            records: list[Record] = yield Read(log)
            if not records:
                continue
            names = {
                item.checkpoint_ns for item in _Log(log, records).stored if item.run_id in runs
            }
            for name in names:
                if keys.log(name) == log:
                    yield from self._drop(keys, name, lambda stored, _w: stored.run_id in runs)

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> Steps[None]:
        """``BaseCheckpointSaver.copy_thread``: every namespace, checkpoint and write."""
        source = self.layout.thread(str(source_thread_id))
        target = self.layout.thread(str(target_thread_id))
        names = yield from self._namespaces(source)
        for name in names:
            log = source.log(name)
            records: list[Record] = yield Read(log)
            if not records:
                continue
            whole = _Log(log, records)
            for stored in whole.stored:  # writes first: a crash leaves no checkpoint short
                writes: list[Record] = yield Read(source.writes(name, stored.checkpoint_id))
                if writes:
                    yield Append(target.writes(name, stored.checkpoint_id), writes)
            yield from self._register(target, name)
            target_log = target.log(name)
            self._forget(target_log)
            _last, start = yield from self._tail_state(target, name)
            batch = _repack(whole.stored, whole.resolve, start, str(target_thread_id))
            yield Append(target_log, batch)
            self._forget(target_log)


class _Placement:
    """Where a new checkpoint's channel values are, once its batch's position is known."""

    def __init__(
        self,
        versions: ChannelVersions,
        own: dict[str, int | None],
        inherited: Mapping[str, Entry],
        blobs: list[Blob],
    ) -> None:
        self.versions = versions
        self.own = own  # channel -> index in blobs (None: emptied by this checkpoint)
        self.inherited = inherited  # the parent's entries
        self.blobs = blobs

    def entries(self, start: int) -> dict[str, Entry]:
        """Every channel of the checkpoint -> its value's entry, the batch at ``start``."""
        entries: dict[str, Entry] = {}
        for channel, version in self.versions.items():
            if channel in self.own:
                index = self.own[channel]
                if index is None:
                    entries[channel] = (version, -1, EMPTY)
                else:
                    entries[channel] = (version, start + index, self.blobs[index].record_id)
                continue
            parent_entry = self.inherited.get(channel)
            if parent_entry is not None and parent_entry[0] == version:
                entries[channel] = parent_entry
            else:
                entries[channel] = (version, -1, None)  # found by a search on read
        return entries


def _ready(stored: Stored, known: Mapping[str, Blob]) -> bool:
    return all(
        record_id == EMPTY or (record_id is not None and record_id in known)
        for _v, _p, record_id in stored.entries.values()
    )


def _ranges(positions: list[int]) -> list[tuple[int, int]]:
    """Sorted positions -> ``(start, stop)`` slices, merging neighbours within GAP."""
    ranges: list[tuple[int, int]] = []
    for position in positions:
        if ranges and position - ranges[-1][1] < GAP:
            ranges[-1] = (ranges[-1][0], position + 1)
        else:
            ranges.append((position, position + 1))
    return ranges


def _repack(
    stored: list[Stored],
    resolve: Callable[[Stored], dict[str, tuple[Any, Blob | None]]],
    start: int,
    thread_id: str | None = None,
) -> list[Record]:
    """Records of a new log holding ``stored`` (in order) from position ``start``: each
    value once, each checkpoint pointing at exact positions."""
    out: list[Record] = []
    placed: dict[str, int] = {}
    for item in stored:
        entries: dict[str, Entry] = {}
        for channel, (version, blob) in resolve(item).items():
            if blob is None:
                entries[channel] = (version, -1, EMPTY)
                continue
            if blob.record_id not in placed:
                placed[blob.record_id] = start + len(out)
                out.append(encode_blob(blob))
            entries[channel] = (version, placed[blob.record_id], blob.record_id)
        moved = replace(
            item,
            position=start + len(out),
            entries=entries,
            thread_id=item.thread_id if thread_id is None else thread_id,
        )
        out.append(encode_checkpoint(moved))
    return out
