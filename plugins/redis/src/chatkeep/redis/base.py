"""What the blocking and the asyncio Redis stores share: settings, key layout, the retry
policy, and the requests and replies of every operation (built and read here, sent by
:mod:`chatkeep.redis.store` or :mod:`chatkeep.redis.store_async`)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any, ClassVar

from chatkeep.core.backend import AppendConflict, Record, RecordConflict, StoreUnavailable

from .config import DEFAULT_URL, Settings, parse_settings
from .faults import Faults
from .layout import (
    Layout,
    decode_member,
    digest,
    element_body,
    encode_session_id,
    prefix_range,
)
from .plugin import CAPABILITIES, CLUSTER_CAPABILITIES
from .retrying import RetryPolicy

__all__ = ["BACKFILL_SCAN_COUNT", "KEYS_PER_CALL", "RECENT_BUDGET", "RedisBase"]

#: How many per-slot indexes of a cluster node one listing call walks at most.
KEYS_PER_CALL = 256
#: SCAN's COUNT for the one-time search for 0.1-era sessions (at least ``scan_count``): a
#: few milliseconds of server time per call, so a database of 100,000 keys takes ten.
BACKFILL_SCAN_COUNT = 10_000
#: How many members of the last-append index one ``recent_sessions`` script call examines
#: at most (a narrow prefix makes the store call again rather than block the server).
RECENT_BUDGET = 2000

_NO_CONDITION = (b"0", b"")


class RedisBase:
    """Configuration and the protocol of the Redis store, without I/O."""

    capabilities: ClassVar[frozenset[str]] = CAPABILITIES
    #: The async hooks may be awaited on any event loop, loops that come and go included:
    #: each loop gets its own client, closed as that loop closes (see ``store_async``).
    loop_safe_async: ClassVar[bool] = True

    def __init__(self, url: str = DEFAULT_URL, **options: Any) -> None:
        # None means "not given" for chatkeep's own keywords (the URL or the default).
        given = {name: value for name, value in options.items() if value is not None}
        self._setup(parse_settings(url, **given))

    def _setup(self, settings: Settings) -> None:
        self._settings = settings
        self._layout = Layout(settings.key_prefix, settings.namespace, cluster=settings.cluster)
        self._policy = RetryPolicy(
            retries=settings.retries,
            backoff=settings.retry_backoff,
            backoff_max=settings.retry_backoff_max,
            faults=Faults(settings.redacted_url, settings.secrets),
        )
        self._ttl_arg = str(settings.ttl_ms or 0).encode()
        self._closed = False
        if settings.cluster:
            # No last-append index on a cluster (see Layout.recent_key): no ``recent``.
            self.capabilities = CLUSTER_CAPABILITIES  # type: ignore[misc]

    # -- introspection ---------------------------------------------------------------------

    @property
    def namespace(self) -> str | None:
        """The tenant this store sees (``None``: the default namespace)."""
        return self._settings.namespace

    @property
    def key_prefix(self) -> str:
        """The raw prefix of every key (``chatkeep:``)."""
        return self._settings.key_prefix

    @property
    def ttl(self) -> timedelta | None:
        """How long a session lives after its last append (``None``: forever)."""
        ttl_ms = self._settings.ttl_ms
        return None if ttl_ms is None else timedelta(milliseconds=ttl_ms)

    @property
    def is_cluster(self) -> bool:
        """Whether this store talks to a Redis Cluster."""
        return self._settings.cluster

    def keys(self, session_id: str) -> tuple[str, str, str]:
        """The (log, digests, legacy ids) key names of a session, e.g. for ``redis-cli``."""
        return self._layout.keys(session_id)

    def __repr__(self) -> str:
        # Only the redacted URL: the real one carries the password.
        namespace = f" namespace={self.namespace!r}" if self.namespace is not None else ""
        return (
            f"<{type(self).__name__} url={self._settings.redacted_url!r} "
            f"key_prefix={self.key_prefix!r}{namespace}>"
        )

    def _check_open(self) -> None:
        if self._closed:
            raise StoreUnavailable(f"this {type(self).__name__} is closed; open a new one")

    # -- requests and replies --------------------------------------------------------------

    def _append_command(
        self, session_id: str, records: list[Record], condition: tuple[bytes, bytes]
    ) -> list[bytes | int]:
        """The EVALSHA arguments (after the SHA) of an append; ``condition`` is
        (``b"1"``, expected last id) for a conditional one, else ``_NO_CONDITION``."""
        log, digests, legacy, index, member = self._layout.binary_keys(session_id)
        recent = self._layout.recent_key()
        arguments: list[bytes | int]
        if recent is None:
            arguments = [4, log, digests, legacy, index, self._ttl_arg]
        else:
            arguments = [5, log, digests, legacy, index, recent, self._ttl_arg]
        arguments += condition
        arguments.append(member)
        for record in records:
            arguments.append(record.id.encode())
            arguments.append(digest(record.data))
            arguments.append(element_body(record))
        return arguments

    def _delete_command(self, session_id: str) -> list[bytes | int]:
        """The EVALSHA arguments (after the SHA) of a delete."""
        log, digests, legacy, index, member = self._layout.binary_keys(session_id)
        recent = self._layout.recent_key()
        if recent is None:
            return [4, log, digests, legacy, index, member]
        markers = [self._layout.indexed_marker(), self._layout.recent_marker()]
        return [7, log, digests, legacy, index, recent, *markers, member]

    def _recent_command(
        self, prefix: str | None, cursor: tuple[bytes, bytes], wanted: int
    ) -> list[bytes | int]:
        """The EVALSHA arguments (after the SHA) of one page of the last-append index from
        ``cursor`` (score, member; ``(b"+inf", b"")`` for the newest)."""
        recent = self._layout.recent_key()
        assert recent is not None, "a cluster declares no 'recent'"
        encoded = encode_session_id(prefix).encode() if prefix else b""
        score, member = cursor
        stem = self._layout.key_stem()
        index = self._layout.index_keys()[0]
        low, high = prefix_range(prefix)
        return [2, recent, index, stem, score, member, wanted, encoded, RECENT_BUDGET, low, high]

    def _backfill_recent_command(self, bound: bytes) -> list[bytes | int]:
        """The EVALSHA arguments (after the SHA) of one page of the ``{}:recent`` back-fill."""
        recent = self._layout.recent_key()
        assert recent is not None, "a cluster declares no 'recent'"
        index = self._layout.index_keys()[0]
        marker = self._layout.recent_marker()
        return [3, index, recent, marker, bound, self._settings.scan_count]

    @staticmethod
    def _recent_cursor(before: tuple[float, str] | None) -> tuple[bytes, bytes]:
        if before is None:
            return b"+inf", b""
        return repr(float(before[0])).encode(), encode_session_id(before[1]).encode()

    @staticmethod
    def _read_recent(
        reply: list[bytes],
    ) -> tuple[bool, tuple[bytes, bytes], list[tuple[str, float]]]:
        """A page reply: whether the index is exhausted, the cursor to go on from, and the
        (session id, updated) pairs."""
        done, score, member, *items = reply
        pairs = []
        for name, at in zip(items[::2], items[1::2], strict=True):
            session_id = decode_member(name)
            if session_id is not None:
                pairs.append((session_id, float(at)))
        return bool(int(done)), (score, member), pairs

    @staticmethod
    def _condition(after: str | None) -> tuple[bytes, bytes]:
        return b"1", b"" if after is None else after.encode()

    @staticmethod
    def _check_append(session_id: str, reply: Any, after: str | None = None) -> None:
        """Raise what an append script's reply means, if it refused the batch."""
        if isinstance(reply, list):
            if reply and reply[0] == b"conflict":
                raise RecordConflict(session_id, reply[1].decode())
            raise AppendConflict(session_id, after)

    def _page_command(
        self, index_keys: list[bytes], bound: bytes, low: bytes, high: bytes
    ) -> list[bytes | int]:
        """The EVALSHA arguments (after the SHA) of one listing page over ``index_keys``,
        continuing in the first after ``bound`` (``b""``: from its start)."""
        count = self._settings.scan_count
        return [0, low, high, count, self._layout.key_stem(), bound, *index_keys]

    def _index_groups(self, node_of: Any) -> list[tuple[Any, list[bytes]]]:
        """The namespace's index keys in calls' worth: ``[(node, keys)]``, each group on one
        cluster node (``node_of(key)``) and at most :data:`KEYS_PER_CALL` long; one group
        with the single index (node ``None``) on a single server."""
        keys = self._layout.index_keys()
        if not self.is_cluster:
            return [(None, keys)]
        groups: list[tuple[Any, list[bytes]]] = []
        for key in keys:
            node = node_of(key)
            if groups and groups[-1][0] is node and len(groups[-1][1]) < KEYS_PER_CALL:
                groups[-1][1].append(key)
            else:
                groups.append((node, [key]))
        return groups

    def _backfill_commands(self, keys: list[bytes]) -> list[list[Any]]:
        """ZADD commands that put the sessions of SCANned log ``keys`` (of any namespace
        under the key prefix) into their namespaces' indexes."""
        members: dict[bytes, list[bytes | int]] = {}
        layouts: dict[str, Layout] = {}
        for key in keys:
            namespace = self._layout.namespace_of(key)
            if namespace is None:
                continue
            layout = layouts.get(namespace)
            if layout is None:
                layout = Layout(self.key_prefix, namespace or None, cluster=self.is_cluster)
                layouts[namespace] = layout
            session_id = layout.session_of(key)
            if session_id is not None:
                member = encode_session_id(session_id)
                members.setdefault(layout.index_key_for(member), []).extend((0, member.encode()))
        return [["ZADD", index, *scores] for index, scores in members.items()]

    @staticmethod
    def _only_missing(command: list[Any], scores: list[Any]) -> list[Any]:
        """A back-fill ZADD (``command``) cut to the members not in its index yet
        (``scores``: their ZMSCORE reply), or ``[]``: a read writes nothing unless it finds
        sessions of chatkeep-redis 0.1 to index."""
        members = command[3::2]
        missing = [m for m, score in zip(members, scores, strict=True) if score is None]
        return [*command[:2], *[x for m in missing for x in (0, m)]] if missing else []

    def _indexed_markers(self) -> list[bytes]:
        """The keys either of which says this namespace's 0.1-era sessions are indexed."""
        return [self._layout.indexed_marker(), self._layout.every_namespace_marker()]

    @staticmethod
    def _read_page(reply: list[bytes]) -> tuple[list[str], int, bytes]:
        """A page reply: its session ids, how many indexes it finished, where to continue."""
        finished, bound, *members = reply
        ids = [session_id for session_id in map(decode_member, members) if session_id]
        return ids, int(finished), bound
