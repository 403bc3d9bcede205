"""The running count's checks as store programs (no I/O here): is the view's message
count that a record's :class:`~chatkeep.core.views._control.CountMark` claims proven by
the log around it?

A mark is trusted only when the log holds it in place: the record ``k + 1`` back from the
one carrying it is the mark's ``after`` (for ``after=None``: its batch starts the log).
"""

from __future__ import annotations

from ..records import Record
from ._control import CountMark, count_mark
from ._program import Program, Read

__all__ = ["CountMark", "marked_count_program", "proven_count_program", "tail_count_program"]


def marked_count_program(
    session_id: str, last: Record, log: list[Record] | None
) -> Program[int | None]:
    """The view's message count from the mark ``last`` (the log's last record) carries,
    if the log proves it. ``log`` is the whole log when it is already read (then nothing
    more is), else one read of at most two records."""
    mark = count_mark(last.data)
    if mark is None:
        return None
    k = mark.k
    if log is not None:
        if mark.after is None:
            return mark.n if len(log) == k else None
        index = len(log) - 1 - k
        return mark.n if index >= 0 and log[index].id == mark.after else None
    # The record before the batch and the batch's first: [before, first] when the log is
    # longer than k, [first] when it is exactly k, [] when it is shorter.
    got: list[Record] = yield Read(session_id, -(k + 1), -(k - 1) or None)
    if k == 1 and got and got[-1].id != last.id:
        return None  # appended to since the last record was read
    if mark.after is None:
        return mark.n if len(got) == 1 else None
    return mark.n if len(got) == 2 and got[0].id == mark.after else None


def proven_count_program(session_id: str, position: int, record: Record) -> Program[int | None]:
    """The view's message count just after ``record`` (at absolute ``position`` in
    ``session_id``'s own log) from the mark it carries, if the log proves it: at most one
    read of one record."""
    mark = count_mark(record.data)
    if mark is None:
        return None
    before = position - mark.k  # the record right before the mark's batch
    if mark.after is None:
        return mark.n if before == -1 else None
    if before < 0:
        return None
    got: list[Record] = yield Read(session_id, before, before + 1)
    return mark.n if got and got[0].id == mark.after else None


def tail_count_program(session_id: str) -> Program[tuple[int, str | None] | None]:
    """``(the view's message count, the id of the log's last record)`` when the end of the
    log proves the count: ``(0, None)`` for an empty log, else the last record's verified
    mark; ``None`` otherwise. At most two reads (of one record, then of two)."""
    tail: list[Record] = yield Read(session_id, -1)
    if not tail:
        return 0, None
    last = tail[-1]
    n = yield from marked_count_program(session_id, last, None)
    return None if n is None else (n, last.id)
