"""The words a full-text index keeps of each record, and building an index for records
stored before it existed (``chatkeep index build``).

A backend that declares :data:`~chatkeep.core.store.FULLTEXT` never parses a record: the
core hands it, with each record it appends,
:func:`~chatkeep.core.search_text.record_words` of it, and indexes older
records with :func:`build_index`::

    from chatkeep.core import open_store
    from chatkeep.core.search_index import build_index

    store = open_store("sqlite:///chats.db")
    build_index(store)     # resumable: stopped part way, a second call goes on from there
"""

from __future__ import annotations

from collections.abc import Callable

from .errors import CapabilityMissing
from .search_text import record_words
from .store import FULLTEXT, Store

__all__ = ["BUILD_BATCH", "build_index"]

#: How many records :func:`build_index` indexes per transaction.
BUILD_BATCH = 500


def build_index(
    store: Store,
    *,
    batch: int = BUILD_BATCH,
    progress: Callable[[int, int], None] | None = None,
) -> int:
    """Index every record the store's full-text index does not cover yet; return how
    many were indexed. Each batch of ``batch`` records is indexed in one transaction, so
    an interrupted build loses at most one batch of work and a second call goes on from
    there. ``progress(done, total)`` is called after each batch. Raises
    :class:`~chatkeep.core.errors.CapabilityMissing` for a store without
    :data:`~chatkeep.core.store.FULLTEXT`."""
    if not store.supports(FULLTEXT):
        raise CapabilityMissing(store.name, FULLTEXT)
    if type(batch) is not int or batch < 1:
        raise ValueError(f"batch must be a positive int, not {batch!r}")
    total = store.fulltext_pending()
    done = 0
    while True:
        backlog = store.fulltext_backlog(batch)
        if not backlog:
            return done
        store.fulltext_backfill([(key, record_words(record.data)) for key, _, record in backlog])
        done += len(backlog)
        if progress is not None:
            progress(done, max(total, done))
