"""Deleting a session that may have live forks, crash-safely.

A fork reads its prefix from its parent, so erasing the parent must not leave it dangling.
``cascade=True`` deletes the forks too (recursively). The default makes each live fork
self-contained first: its log is rewritten as ``[base] + the parent's prefix (copied) +
[rebased] + its own records``, so every old position moves by the same ``shift`` (forks of
the fork keep working through the ``base`` record) and nothing is lost.

The rewrite survives a crash at any step:

1. a ``chatkeep.rebuild`` record in the parent names the fork and a temporary session;
2. the rewritten log is written to the temporary session and checked complete;
3. the fork is deleted and the rewritten log copied into it;
4. the temporary session is deleted; after all forks, the parent is.

If any step fails, calling ``delete_session`` again finishes the job: a fork still pointing
at the parent is redone from scratch, an empty or half-copied fork is completed from the
complete temporary copy, leftovers are removed.
"""

from __future__ import annotations

from ..errors import CorruptRecord, ViewError
from ..ids import new_id
from ..records import Record, check_session_id
from ._control import (
    BASE,
    FORK,
    FORKED,
    REBASED,
    REBUILD,
    Control,
    control_record,
    is_control_data,
    parse_entry,
)
from ._program import Append, Delete, Program, Read
from ._walk import read_all, resolve_fork_point

__all__ = ["TEMP_PREFIX", "delete_program", "forks_program"]

#: Session ids of temporary copies start with this.
TEMP_PREFIX = "chatkeep.tmp."
_COPY_CHUNK = 500


def _control_of(session_id: str, position: int, record: Record) -> Control | None:
    if not is_control_data(record.data):
        return None
    try:
        entry = parse_entry(record.data)
    except ValueError as exc:
        raise CorruptRecord(session_id, position, str(exc), record.id) from exc
    return entry if isinstance(entry, Control) else None


def _registrations(
    session_id: str, records: list[Record]
) -> tuple[list[str], dict[str, list[str]]]:
    """The forks registered in a log (in order, once each) and the temporary copies of
    earlier, interrupted rebuilds of each."""
    children: list[str] = []
    temps: dict[str, list[str]] = {}
    for position, record in enumerate(records):
        control = _control_of(session_id, position, record)
        if control is None:
            continue
        if control.kind == FORKED and control["child"] not in children:
            children.append(control["child"])
        elif control.kind == REBUILD:
            temps.setdefault(control["child"], []).append(control["temp"])
    return children, temps


def _head(session_id: str) -> Program[tuple[Record | None, Control | None]]:
    first: list[Record] = yield Read(session_id, 0, 1)
    if not first:
        return None, None
    return first[0], _control_of(session_id, 0, first[0])


def forks_program(session_id: str) -> Program[list[str]]:
    """The ids of the live forks of ``session_id`` (forks whose log still starts from it)."""
    session_id = check_session_id(session_id)
    records = yield from read_all(session_id)
    children, _ = _registrations(session_id, records)
    live = []
    for child in children:
        _, head = yield from _head(child)
        if head is not None and head.kind == FORK and head["parent"] == session_id:
            live.append(child)
    return live


def delete_program(session_id: str, cascade: bool = False) -> Program[None]:
    """Delete ``session_id``; deal with its live forks first (see the module docstring)."""
    session_id = check_session_id(session_id)
    records = yield from read_all(session_id)
    children, temps = _registrations(session_id, records)
    for child in children:
        record, head = yield from _head(child)
        live = head is not None and head.kind == FORK and head["parent"] == session_id
        interrupted = child in temps and (
            record is None or (head is not None and head.kind == BASE)
        )
        if cascade and (live or interrupted):
            yield from delete_program(child, cascade=True)
        elif live:
            assert record is not None and head is not None
            yield from _make_self_contained(child, record, head, session_id, records)
        elif interrupted:
            yield from _finish_rebuild(child, head, temps[child])
        for temp in temps.get(child, ()):
            yield Delete(temp)
    yield Delete(session_id)


def _neutral(session_id: str, position: int, record: Record) -> Record:
    """``record`` for a copied prefix: log structure (fork, forked, base, rebuild) becomes
    a no-op with the same id, so checkpoints that name it still line up."""
    control = _control_of(session_id, position, record)
    if control is None or control.kind not in (FORK, FORKED, BASE, REBUILD):
        return record
    return control_record(REBASED, record.id)


def _flatten(session_id: str, records: list[Record]) -> Program[list[Record]]:
    """``records`` (a prefix of ``session_id``'s log) with its own fork ancestry copied
    in front: a self-contained log with the same view."""
    out: list[Record] = []
    if records:
        head = _control_of(session_id, 0, records[0])
        if head is not None and head.kind == FORK:
            _, ancestor = yield from resolve_fork_point(
                session_id, head, records[0].id, head["position"]
            )
            out = yield from _flatten(head["parent"], ancestor)
    out.extend(_neutral(session_id, position, record) for position, record in enumerate(records))
    return out


def _make_self_contained(
    child: str, first: Record, fork: Control, parent: str, parent_records: list[Record]
) -> Program[None]:
    child_records = yield from read_all(child)
    if not child_records or child_records[0].id != first.id:
        raise ViewError(f"fork {child!r} changed while its parent was being deleted; try again")
    end: int = fork["position"]
    anchor: str | None = fork["anchor"]
    if end and (len(parent_records) < end or parent_records[end - 1].id != anchor):
        head = _control_of(parent, 0, parent_records[0]) if parent_records else None
        if head is not None and head.kind == BASE:
            end += head["shift"]
        if end > len(parent_records) or parent_records[end - 1].id != anchor:
            raise CorruptRecord(child, 0, f"its fork point in {parent!r} is gone", first.id)
    prefix = yield from _flatten(parent, parent_records[:end])
    shift = len(prefix) + 1
    rebuilt_tail = [control_record(REBASED, first.id), *child_records[1:]]
    base = control_record(
        BASE, shift=shift, length=shift + len(rebuilt_tail), last=rebuilt_tail[-1].id
    )
    rebuilt = [base, *prefix, *rebuilt_tail]
    seen: set[str] = set()
    for record in rebuilt:
        if record.id in seen:
            raise ViewError(
                f"fork {child!r} cannot be made self-contained: record id {record.id!r} is "
                f"used both in it and in its parent {parent!r}; delete with cascade=True, "
                "or keep the parent"
            )
        seen.add(record.id)
    temp = TEMP_PREFIX + new_id()
    yield Append(parent, [control_record(REBUILD, child=child, temp=temp)])
    yield from _copy_into(temp, rebuilt)
    if not (yield from _complete(temp, base)):
        raise ViewError(f"the temporary copy {temp!r} of fork {child!r} did not read back whole")
    yield Delete(child)
    yield from _copy_into(child, rebuilt)
    yield Delete(temp)


def _complete(session_id: str, base: Record) -> Program[bool]:
    control = _control_of(session_id, 0, base)
    if control is None or control.kind != BASE:
        return False
    length: int = control["length"]
    last: list[Record] = yield Read(session_id, length - 1, length)
    return bool(last) and last[0].id == control["last"]


def _copy_into(session_id: str, records: list[Record]) -> Program[None]:
    """Append whatever part of ``records`` the log does not hold yet, in slices (each
    append is atomic, so the log always holds a prefix of ``records``)."""
    existing = yield from read_all(session_id)
    if [r.id for r in existing] != [r.id for r in records[: len(existing)]]:
        raise ViewError(f"session {session_id!r} was written to while it was being rebuilt")
    for start in range(len(existing), len(records), _COPY_CHUNK):
        yield Append(session_id, records[start : start + _COPY_CHUNK])


def _finish_rebuild(child: str, head: Control | None, temps: list[str]) -> Program[None]:
    """Complete a fork whose rewrite an earlier delete started (it is empty or partly
    copied) from the newest complete temporary copy."""
    if head is not None:
        first: list[Record] = yield Read(child, 0, 1)
        if first and (yield from _complete(child, first[0])):
            return
    for temp in reversed(temps):
        temp_first: list[Record] = yield Read(temp, 0, 1)
        if not temp_first or not (yield from _complete(temp, temp_first[0])):
            continue
        if head is not None:
            child_first: list[Record] = yield Read(child, 0, 1)
            if child_first and child_first[0].id != temp_first[0].id:
                continue  # the fork holds another rebuild's records
        yield from _copy_into(child, (yield from read_all(temp)))
        return
    if head is not None:
        raise ViewError(
            f"fork {child!r} is partly rewritten and no complete copy of it is left; "
            "its records so far are kept"
        )
    # An empty fork with no complete copy: it was deleted on purpose before the rewrite.
