"""What one store handle knows about one session's folder.

Nothing here is authoritative (other processes write too): every read lists the folder
first, and every append is a conditional PUT that fails if the handle's idea of the end is
stale. What the handle keeps is what makes the next append a single PUT: the newest segment
(the *tip*: its header has the end, the last record id and the hashes of every id since the
table of contents) and the newest table of contents it knows (Bloom filters of the ids
before that).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from . import frames
from .catalog import Entry, Loaded, Scan
from .contents import Contents
from .recordids import short_hash

__all__ = ["SessionFolder", "Tip"]

_LISTING_LIMIT = 2000


@dataclass(frozen=True, slots=True)
class Tip:
    """The newest segment a handle knows, with its header."""

    entry: Entry
    header: frames.Header


class SessionFolder:
    """One handle's knowledge of one session (guard changes with :attr:`lock`)."""

    __slots__ = (
        "contents",
        "extra",
        "folder",
        "known",
        "legacy_checked",
        "listing",
        "lock",
        "named",
        "seen",
        "tip",
    )

    def __init__(self, folder: str) -> None:
        self.folder = folder
        self.lock = threading.RLock()
        #: Whether :attr:`tip` and :attr:`contents` come from a listing or our own write.
        self.known = False
        self.tip: Tip | None = None
        self.contents: tuple[Entry, Contents] | None = None
        #: Segments between the table of contents and the tip's ``base``, read because the
        #: table the tip's writer knew is gone (normally empty).
        self.extra: dict[int, Loaded] = {}
        #: Segments whose ETag this handle knows, by start (to find them in the cache).
        self.seen: dict[int, Entry] = {}
        #: Whether the ``id`` object of a long session id is known to exist.
        self.named = False
        #: Whether the format-1 layout was looked at for this session.
        self.legacy_checked = False
        #: The last listing from the newest key (a warm read lists only what is newer).
        self.listing: Scan | None = None

    def forget(self) -> None:
        """Drop everything learnt (after a delete, or when the folder looks different)."""
        self.known = False
        self.tip = None
        self.contents = None
        self.extra = {}
        self.seen = {}
        self.listing = None

    def keep_listing(self, scan: Scan) -> None:
        """Remember a listing from the newest key (unless it is very long)."""
        self.listing = scan if len(scan.order) <= _LISTING_LIMIT else None

    @property
    def contents_end(self) -> int:
        """Where the known table of contents ends (0 without one)."""
        return self.contents[1].end if self.contents is not None else 0

    def end(self) -> int:
        """The position after the last record."""
        tip_end = self.tip.header.end if self.tip is not None else 0
        return max(tip_end, self.contents_end)

    def last_id(self) -> str | None:
        """The id of the last record (``None`` for an empty log)."""
        if self.tip is not None and self.tip.header.end >= self.contents_end:
            return self.tip.header.ids[-1]
        if self.contents is not None:
            return self.contents[1].last_id
        return None

    def recent(self) -> frames.Recent:
        """The segments from the table of contents to the end, with their id hashes: what a
        segment appended at :meth:`end` carries in its header."""
        tip = self.tip
        if tip is None:
            return frames.Recent()
        floor = self.contents_end
        base = tip.header.base or 0
        recent = frames.Recent()
        if floor < base:
            for start in sorted(self.extra):
                if start >= floor:
                    ids = self.extra[start].header.ids
                    recent = recent.extended(start, [short_hash(i) for i in ids])
            kept = tip.header.recent
        else:
            kept = tip.header.recent.since(floor)
        recent = frames.Recent(recent.segments + kept.segments, recent.hashes + kept.hashes)
        if tip.entry.start >= floor:
            recent = recent.extended(tip.entry.start, [short_hash(i) for i in tip.header.ids])
        return recent

    def remember(self, entry: Entry) -> None:
        """Note a segment's ETag (so later reads of it hit the cache)."""
        self.seen[entry.start] = entry
        if len(self.seen) > 4096:
            floor = self.contents_end
            self.seen = {start: e for start, e in self.seen.items() if start >= floor}
