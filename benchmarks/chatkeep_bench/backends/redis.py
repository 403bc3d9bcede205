"""Redis: chatkeep vs hand-written redis-py (blocking and asyncio) vs the peers.

Server: ``CHATKEEP_TEST_REDIS_URL`` or ``redis://127.0.0.1:6379/0``. Every key of the run
contains ``ckbench-<token>`` (chatkeep's namespace, the raw keys, the peers' prefixes) and
is deleted at the end with SCAN + UNLINK; nothing else in the database is touched.
"""

from __future__ import annotations

import json
import os
from typing import Any, cast
from urllib.parse import urlencode, urlsplit, urlunsplit

from chatkeep.core import new_id, redact_url

from ..adapters import adapter_rows
from ..peers import AgentsSessions, LangChainHistories, MafProvider, optional
from ..variants import (
    AnyVariant,
    AsyncVariant,
    ChatkeepAsyncStore,
    ChatkeepBackend,
    ChatkeepFullLoad,
    ChatkeepFullLoadAsync,
    ChatkeepHistoryProvider,
    ChatkeepStore,
    ChatkeepSyncMessages,
    Kind,
    Level,
    Unavailable,
    Variant,
    batches,
    role_of,
)
from ..workload import WINDOW, encode_dict, exchange, message_dict, payload
from . import BackendRun, Context, ServiceMissing

__all__ = ["RawRedis", "RawRedisAsync", "setup"]

DEFAULT_URL = "redis://127.0.0.1:6379/0"


def _with_query(url: str, **options: str) -> str:
    parts = urlsplit(url)
    query = "&".join(q for q in (parts.query, urlencode(options)) if q)
    return urlunsplit(parts._replace(query=query))


def _exchange(decode: bool, number: int) -> tuple[bytes, bytes]:
    if decode:
        first, second = (
            encode_dict(message_dict(kind, number, new_id())) for kind in exchange(number)
        )
        return first, second
    asked, answered = exchange(number)
    return payload(asked, number % 128), payload(answered, number % 128)


class RawRedis(Variant):
    """The least a hand-written turn can do: one LRANGE of the last 50 elements, one RPUSH
    of two (atomic by itself). Elements are the message bytes only: no record ids kept
    apart, so no idempotent retry (chatkeep's append also checks and adds ids to a set)."""

    kind: Kind = "raw"

    def __init__(self, url: str, prefix: str, *, decode: bool, full: bool = False) -> None:
        self.name = "raw redis-py + json" if decode else "raw redis-py"
        self.level: Level = "messages" if decode else "records"
        self._url = url
        self._prefix = f"{prefix}raw{'json' if decode else ''}:"
        self._first = -WINDOW
        if full:  # the full level: LRANGE 0 -1 decoded, no append
            self.name, self.level, decode = "raw redis-py + json (whole session)", "full", True
            self._prefix, self._first = f"{prefix}rawfull:", 0
        self._decode = decode
        self._client: Any = None

    def open(self) -> None:
        import redis

        self._client = redis.Redis.from_url(self._url)

    def fill(self, session_id: str, count: int) -> None:
        key = self._prefix + session_id
        for part in batches(count):
            if self._decode:
                values = [encode_dict(message_dict(role_of(n), n, new_id())) for n in part]
            else:
                values = [payload(role_of(n), n) for n in part]
            self._client.rpush(key, *values)

    def load(self, session_id: str) -> object:
        elements = self._client.lrange(self._prefix + session_id, self._first, -1)
        if self._decode:
            return [json.loads(element) for element in elements]
        return elements

    def turn(self, session_id: str, number: int) -> None:
        self.load(session_id)
        if self._first == 0:
            return
        self._client.rpush(self._prefix + session_id, *_exchange(self._decode, number))

    def close(self) -> None:
        if self._client is not None:
            self._client.close()


class RawRedisAsync(AsyncVariant):
    """:class:`RawRedis` on ``redis.asyncio``."""

    kind: Kind = "raw"

    def __init__(self, url: str, prefix: str, *, decode: bool, full: bool = False) -> None:
        self.name = "raw redis.asyncio + json" if decode else "raw redis.asyncio"
        self.level: Level = "messages" if decode else "records"
        self._url = url
        self._prefix = f"{prefix}rawa{'json' if decode else ''}:"
        self._first = -WINDOW
        if full:  # the full level: LRANGE 0 -1 decoded, no append
            self.name, self.level, decode = "raw redis.asyncio + json (whole session)", "full", True
            self._prefix, self._first = f"{prefix}rawafull:", 0
        self._decode = decode
        self._client: Any = None

    async def open(self) -> None:
        import redis.asyncio

        self._client = redis.asyncio.Redis.from_url(self._url)

    async def fill(self, session_id: str, count: int) -> None:
        key = self._prefix + session_id
        for part in batches(count):
            if self._decode:
                values = [encode_dict(message_dict(role_of(n), n, new_id())) for n in part]
            else:
                values = [payload(role_of(n), n) for n in part]
            await self._client.rpush(key, *values)

    async def load(self, session_id: str) -> object:
        elements = await self._client.lrange(self._prefix + session_id, self._first, -1)
        if self._decode:
            return [json.loads(element) for element in elements]
        return elements

    async def turn(self, session_id: str, number: int) -> None:
        await self.load(session_id)
        if self._first == 0:
            return
        await self._client.rpush(self._prefix + session_id, *_exchange(self._decode, number))

    async def close(self) -> None:
        if self._client is not None:
            await self._client.aclose()


def _has_search_and_json(client: Any) -> bool:
    """Whether the server has the RediSearch and RedisJSON commands (Redis Stack, 8+)."""
    try:
        found = client.execute_command("COMMAND", "INFO", "FT.CREATE", "JSON.SET")
    except Exception:
        return False
    return all(found)


def _peers(url: str, prefix: str, client: Any) -> list[AnyVariant | Unavailable]:
    def agents_redis() -> AnyVariant:
        import redis.asyncio
        from agents.extensions.memory.redis_session import RedisSession

        shared: dict[str, Any] = {}

        async def connect() -> None:
            shared["client"] = redis.asyncio.Redis.from_url(url)

        async def disconnect() -> None:
            await shared["client"].aclose()

        return AgentsSessions(
            "Agents RedisSession",
            lambda sid: RedisSession(
                sid, redis_client=shared["client"], key_prefix=prefix + "agents"
            ),
            before=connect,
            after=disconnect,
        )

    def langchain_community_redis() -> AnyVariant:
        from langchain_community.chat_message_histories import RedisChatMessageHistory

        return LangChainHistories(
            "LangChain RedisChatMessageHistory (community)",
            lambda sid: RedisChatMessageHistory(sid, url=url, key_prefix=prefix + "lc:"),
            note="no tail read: LRANGE 0 -1 of the whole session, then keeps the last 50",
        )

    def langchain_redis() -> AnyVariant | Unavailable:
        name = "LangChain RedisChatMessageHistory (langchain-redis)"
        if not _has_search_and_json(client):
            return Unavailable(
                name, "messages", "peer",
                "unavailable: needs RediSearch + RedisJSON (Redis Stack or Redis 8); "
                "this server has neither",
            )  # fmt: skip
        from langchain_redis import RedisChatMessageHistory as History

        return LangChainHistories(
            name,
            lambda sid: History(
                sid, redis_url=url, key_prefix=prefix + "lcr:", index_name=f"idx:{prefix}lcr"
            ),
        )

    def maf_redis() -> AnyVariant:
        from agent_framework_redis import RedisHistoryProvider

        async def close(provider: Any) -> None:
            await provider.aclose()

        return MafProvider(
            "MAF RedisHistoryProvider",
            lambda: RedisHistoryProvider(
                redis_url=url, key_prefix=prefix + "maf", application_id="ckbench"
            ),
            after=close,
            note="loads the whole session twice a turn (before the run, and to de-duplicate)",
        )

    return [
        optional("Agents RedisSession", ["agents", "redis"], "openai-agents[redis]", agents_redis),
        optional(
            "LangChain RedisChatMessageHistory (community)",
            ["langchain_community", "redis"],
            "langchain-community redis",
            langchain_community_redis,
        ),
        optional(
            "LangChain RedisChatMessageHistory (langchain-redis)",
            ["langchain_redis"],
            "langchain-redis",
            langchain_redis,
        ),
        optional(
            "MAF RedisHistoryProvider",
            ["agent_framework_redis"],
            "agent-framework-redis",
            maf_redis,
        ),
    ]


def setup(context: Context) -> BackendRun:
    """chatkeep on ``<url>?namespace=ckbench-<token>:ck:`` and raw/peer keys beside it."""
    try:
        import redis
    except ImportError as exc:
        raise ServiceMissing("redis-py is not installed (pip install chatkeep-redis)") from exc
    url = os.environ.get("CHATKEEP_TEST_REDIS_URL") or DEFAULT_URL
    client = redis.Redis.from_url(url, socket_connect_timeout=2)
    try:
        client.ping()
    except redis.RedisError as exc:
        raise ServiceMissing(f"no Redis at {redact_url(url)}: {type(exc).__name__}") from None
    prefix = f"ckbench-{context.token}-"
    chatkeep_url = _with_query(url, namespace=prefix + "ck:")
    provider_url = _with_query(url, namespace=prefix + "ckp:")
    view_url = _with_query(url, namespace=prefix + "ckv:")
    variants: list[AnyVariant | Unavailable] = [
        RawRedis(url, prefix, decode=False),
        ChatkeepStore(chatkeep_url),
        ChatkeepBackend(_with_query(url, namespace=prefix + "ckb:")),
        RawRedisAsync(url, prefix, decode=False),
        ChatkeepAsyncStore(chatkeep_url),
        RawRedis(url, prefix, decode=True),
        RawRedisAsync(url, prefix, decode=True),
        ChatkeepHistoryProvider(provider_url),
        ChatkeepHistoryProvider(provider_url, resumed=True),
        ChatkeepSyncMessages(view_url),
        RawRedis(url, prefix, decode=True, full=True),
        RawRedisAsync(url, prefix, decode=True, full=True),
        ChatkeepFullLoad(_with_query(url, namespace=prefix + "ckf:")),
        ChatkeepFullLoadAsync(_with_query(url, namespace=prefix + "ckfa:")),
    ]
    if context.peers:
        variants += _peers(url, prefix, client)
        variants += adapter_rows(lambda tag: _with_query(url, namespace=f"{prefix}{tag}:"))

    def cleanup() -> None:
        keys = list(client.scan_iter(match=f"*{prefix}*", count=1000))
        for start in range(0, len(keys), 1000):
            client.unlink(*keys[start : start + 1000])
        client.close()

    info: dict[str, Any] = cast("dict[str, Any]", client.info("server"))
    server = info.get("redis_version", "?")
    return BackendRun(
        "redis",
        f"Redis {server} at {redact_url(url)}, keys under *{prefix}* (deleted after)",
        variants,
        [cleanup],
    )
