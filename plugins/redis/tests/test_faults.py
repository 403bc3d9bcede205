"""Faults: lost replies, servers that go away, bad credentials, and secrets in messages.

Two kinds of injection:

- a TCP proxy in front of the real Redis that forwards a command, lets the server run it,
  and then cuts the connection before the reply reaches the client (the exact moment where
  a naive retry duplicates a batch), or stops answering altogether;
- fakeredis connections that raise after the fake server processed the command (unit
  level; the append script needs fakeredis' Lua support, ``fakeredis[lua]``).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import logging
import socket
import threading
import time
import traceback
import uuid
from collections.abc import Iterator
from typing import Any, ClassVar

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from chatkeep.core import Record, Store, StoreUnavailable
from chatkeep.redis import RedisStore

FAST = {"retries": 3, "retry_backoff": 0.01, "retry_backoff_max": 0.05}


def sid() -> str:
    return "fault-" + uuid.uuid4().hex


def batch(*ids: str) -> list[Record]:
    return [Record(i, f"data of {i}".encode()) for i in ids]


# -- a proxy that loses replies ----------------------------------------------------------


class FaultyProxy:
    """Forwards TCP between clients and a Redis server, with faults on demand.

    ``lose_reply(marker, times)``: the next ``times`` requests containing ``marker`` reach
    the server, which executes them; the connection is then cut and the reply discarded.
    ``go_away()`` / ``come_back()``: refuse (and cut) every connection, then accept again.
    """

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.lost = 0
        self._marker: bytes | None = None
        self._times = 0
        self._lock = threading.Lock()
        self._sockets: set[socket.socket] = set()
        self._listener = self._listen(0)
        self.port = self._listener.getsockname()[1]
        self._running = True
        threading.Thread(target=self._accept_loop, args=(self._listener,), daemon=True).start()

    def _listen(self, port: int) -> socket.socket:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", port))
        listener.listen(64)
        return listener

    def lose_reply(self, marker: bytes, times: int = 1) -> None:
        with self._lock:
            self._marker, self._times = marker, times

    def go_away(self) -> None:
        with self._lock:
            self._running = False
            sockets, self._sockets = self._sockets, set()
        self._listener.close()
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def come_back(self) -> None:
        self._listener = self._listen(self.port)
        self._running = True
        threading.Thread(target=self._accept_loop, args=(self._listener,), daemon=True).start()

    close = go_away

    def _accept_loop(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.target)
            with self._lock:
                if not self._running:
                    client.close()
                    server.close()
                    continue
                self._sockets.update((client, server))
            swallow = threading.Event()
            threading.Thread(
                target=self._upstream, args=(client, server, swallow), daemon=True
            ).start()
            threading.Thread(
                target=self._downstream, args=(client, server, swallow), daemon=True
            ).start()

    def _take_fault(self, data: bytes) -> bool:
        with self._lock:
            if self._marker is not None and self._times > 0 and self._marker in data:
                self._times -= 1
                self.lost += 1
                return True
        return False

    def _upstream(
        self, client: socket.socket, server: socket.socket, swallow: threading.Event
    ) -> None:
        with contextlib.suppress(OSError):
            while data := client.recv(65536):
                if self._take_fault(data):
                    swallow.set()  # set before forwarding: the reply must not get through
                server.sendall(data)
        self._cut(client, server)

    def _downstream(
        self, client: socket.socket, server: socket.socket, swallow: threading.Event
    ) -> None:
        with contextlib.suppress(OSError):
            while data := server.recv(65536):
                if swallow.is_set():
                    break  # the server answered; the client never hears it
                client.sendall(data)
        self._cut(client, server)

    def _cut(self, *sockets: socket.socket) -> None:
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()


@pytest.fixture
def proxy(redis_url: str) -> Iterator[FaultyProxy]:
    parts = redis.connection.parse_url(redis_url)
    running = FaultyProxy((parts.get("host", "127.0.0.1"), int(parts.get("port", 6379))))
    yield running
    running.close()


@pytest.fixture
def via_proxy(proxy: FaultyProxy, redis_url: str, redis_namespace: str) -> str:
    # The same database as the server under test (CHATKEEP_TEST_REDIS_URL may name one).
    database = redis.connection.parse_url(redis_url).get("db", 0)
    return f"redis://127.0.0.1:{proxy.port}/{database}?key_prefix={redis_namespace}"


@pytest.fixture
def direct(redis_store_url: str) -> Iterator[RedisStore]:
    """A second store on the same namespace that bypasses the proxy, to check the truth."""
    store = RedisStore(redis_store_url)
    yield store
    store.close()


@pytest.fixture
def redis_store_url_for(redis_url: str, redis_namespace: str) -> str:
    return f"{redis_url.split('?', maxsplit=1)[0]}?key_prefix={redis_namespace}"


def test_lost_append_reply_is_retried_without_duplicates(
    proxy: FaultyProxy, via_proxy: str, redis_store_url_for: str
) -> None:
    store = Store(RedisStore(via_proxy, **FAST), name="redis")
    truth = RedisStore(redis_store_url_for)
    session = sid()
    try:
        store.append(sid(), batch("warm-up"))  # the script is cached: appends are EVALSHA
        proxy.lose_reply(b"EVALSHA")
        store.append(session, batch("a", "b", "c"))
        assert proxy.lost == 1
        assert truth.read(session) == batch("a", "b", "c")
    finally:
        store.close()
        truth.close()


def test_lost_async_append_reply_is_retried_without_duplicates(
    proxy: FaultyProxy, via_proxy: str, redis_store_url_for: str
) -> None:
    store = Store(RedisStore(via_proxy, **FAST), name="redis")
    truth = RedisStore(redis_store_url_for)
    session = sid()

    async def main() -> None:
        await store.aappend(sid(), batch("warm-up"))
        proxy.lose_reply(b"EVALSHA", times=2)
        await store.aappend(session, batch("a", "b"))
        await store.aclose()

    try:
        asyncio.run(main())
        assert proxy.lost == 2
        assert truth.read(session) == batch("a", "b")
    finally:
        truth.close()


def _raise_on_none_inside(module: str) -> Any:
    """A function, compiled as if it were part of ``module``, that uses a None writer."""
    namespace: dict[str, Any] = {"__name__": module}
    exec("def send(writer):\n    writer.writelines([b'PING'])\n", namespace)
    return namespace["send"]


def test_connection_torn_down_under_an_async_command_is_retried(
    redis_store_url: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # redis-py's asyncio cluster client can disconnect a connection another task is using;
    # the user then fails inside redis.asyncio with an AttributeError on None.
    backend = RedisStore(redis_store_url, **FAST)
    store = Store(backend, name="redis")
    session = sid()
    send = _raise_on_none_inside("redis.asyncio.connection")

    async def main() -> None:
        await store.aappend(session, batch("a"))  # makes this loop's client
        client = backend._async._handle().client
        real = client.execute_command
        faults = [1, 1]

        async def torn_down(*args: Any, **kwargs: Any) -> Any:
            if faults:
                faults.pop()
                send(None)
            return await real(*args, **kwargs)

        monkeypatch.setattr(client, "execute_command", torn_down)
        await store.aappend(session, batch("b"))
        assert await store.aread(session) == batch("a", "b")
        await store.aclose()

    with caplog.at_level(logging.WARNING, logger="chatkeep.redis"):
        asyncio.run(main())
    retries = [r.getMessage() for r in caplog.records if r.name == "chatkeep.redis"]
    assert len(retries) == 2
    assert all("closed by the driver while in use" in message for message in retries)


def test_other_attribute_errors_are_not_mistaken_for_lost_connections(
    redis_store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    backend = RedisStore(redis_store_url, **FAST)
    store = Store(backend, name="redis")
    elsewhere = _raise_on_none_inside("somebody.else")

    async def main() -> None:
        await store.aappend(sid(), batch("a"))
        client = backend._async._handle().client

        async def broken(*args: Any, **kwargs: Any) -> Any:
            elsewhere(None)

        monkeypatch.setattr(client, "execute_command", broken)
        try:
            with pytest.raises(AttributeError, match="writelines"):
                await store.aappend(sid(), batch("b"))
        finally:
            monkeypatch.undo()
            await store.aclose()

    asyncio.run(main())


def test_replies_lost_on_every_attempt_give_store_unavailable_and_whole_batch(
    proxy: FaultyProxy, via_proxy: str, redis_store_url_for: str
) -> None:
    store = Store(RedisStore(via_proxy, **FAST), name="redis")
    truth = RedisStore(redis_store_url_for)
    session = sid()
    try:
        store.append(sid(), batch("warm-up"))
        proxy.lose_reply(b"EVALSHA", times=100)
        with pytest.raises(StoreUnavailable, match="append failed 4 time"):
            store.append(session, batch("a", "b", "c"))
        assert proxy.lost == 4  # the first attempt and three retries
        # The server ran the script every time; the batch is there exactly once.
        assert truth.read(session) == batch("a", "b", "c")
        proxy.lose_reply(b"EVALSHA", times=0)
        store.append(session, batch("a", "b", "c"))  # the caller's retry is a no-op
        assert truth.read(session) == batch("a", "b", "c")
    finally:
        store.close()
        truth.close()


def test_lost_read_reply_is_retried(proxy: FaultyProxy, via_proxy: str) -> None:
    store = Store(RedisStore(via_proxy, **FAST), name="redis")
    session = sid()
    try:
        store.append(session, batch("a", "b"))
        proxy.lose_reply(b"LRANGE")
        assert store.read(session, -1) == batch("b")
        assert proxy.lost == 1
    finally:
        store.close()


def test_server_gone_mid_run_then_back(
    proxy: FaultyProxy, via_proxy: str, redis_store_url_for: str
) -> None:
    store = Store(RedisStore(via_proxy, **FAST), name="redis")
    truth = RedisStore(redis_store_url_for)
    session = sid()
    try:
        store.append(session, batch("a"))
        proxy.go_away()
        started = time.monotonic()
        with pytest.raises(StoreUnavailable) as caught:
            store.append(session, batch("b", "c"))
        assert time.monotonic() - started < 5  # bounded
        assert isinstance(caught.value, ConnectionError)
        with pytest.raises(StoreUnavailable):
            store.read(session)
        with pytest.raises(StoreUnavailable):
            list(store.list_sessions())
        with pytest.raises(StoreUnavailable):
            store.delete(session)
        assert truth.read(session) == batch("a")  # nothing of the failed batch
        proxy.come_back()
        store.append(session, batch("b", "c"))
        assert store.read(session) == batch("a", "b", "c")
    finally:
        store.close()
        truth.close()


def test_server_gone_async(proxy: FaultyProxy, via_proxy: str) -> None:
    store = Store(RedisStore(via_proxy, **FAST), name="redis")

    async def main() -> None:
        session = sid()
        await store.aappend(session, batch("a"))
        proxy.go_away()
        with pytest.raises(StoreUnavailable):
            await store.aappend(session, batch("b"))
        with pytest.raises(StoreUnavailable):
            await store.aread(session)
        with pytest.raises(StoreUnavailable):
            await store.adelete(session)
        with pytest.raises(StoreUnavailable):
            _ = [s async for s in store.alist_sessions()]
        proxy.come_back()
        await store.aappend(session, batch("b"))
        assert await store.aread(session) == batch("a", "b")
        await store.aclose()

    asyncio.run(main())


# -- credentials never shown -------------------------------------------------------------

PASSWORD = "s3cr3t-P@ss/w0rd"
ENCODED_PASSWORD = "s3cr3t-P%40ss%2Fw0rd"


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _everything_shown(exc: BaseException) -> str:
    return "\n".join(
        [
            str(exc),
            repr(exc),
            "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)),
        ]
    )


def test_password_never_shown_when_the_server_is_unreachable(
    caplog: pytest.LogCaptureFixture,
) -> None:
    url = f"redis://alice:{ENCODED_PASSWORD}@127.0.0.1:{_closed_port()}/0?key_prefix=x:"
    backend = RedisStore(url, retries=2, retry_backoff=0.01)
    store = Store(backend, name="redis", url=url)  # as open_store would, but unredacted
    caplog.set_level(logging.DEBUG)
    shown = [repr(backend), repr(store.backend)]
    started = time.monotonic()
    for operation in (
        lambda: store.append("s", batch("a")),
        lambda: store.read("s"),
        lambda: store.delete("s"),
        lambda: list(store.list_sessions()),
        lambda: asyncio.run(store.aappend("s", batch("a"))),
    ):
        with pytest.raises(StoreUnavailable) as caught:
            operation()
        shown.append(_everything_shown(caught.value))
        assert "failed 3 time" in str(caught.value)
    assert time.monotonic() - started < 10
    shown.append(caplog.text)
    assert "retry 1 of 2" in caplog.text
    text = "\n".join(shown)
    assert "127.0.0.1" in text  # the messages do say where
    assert PASSWORD not in text
    assert ENCODED_PASSWORD not in text
    assert "s3cr3t" not in text
    backend.close()


def test_password_never_shown_through_open_store() -> None:
    from chatkeep.core import open_store
    from chatkeep.core.plugins import reset_plugins

    reset_plugins()
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("CHATKEEP_PLUGINS", "redis")
        reset_plugins()
        url = f"redis://:{ENCODED_PASSWORD}@127.0.0.1:{_closed_port()}/0"
        store = open_store(url, retries=0)
        with pytest.raises(StoreUnavailable) as caught:
            store.read("s")
        text = repr(store) + _everything_shown(caught.value)
        assert "s3cr3t" not in text
        store.close()
    reset_plugins()


def test_wrong_password_fails_fast_without_retries_or_leaks(redis_url: str) -> None:
    host_part = redis_url.split("://", 1)[1].rsplit("@", maxsplit=1)[-1]
    url = f"redis://nobody-{uuid.uuid4().hex[:6]}:{ENCODED_PASSWORD}@{host_part}"
    store = Store(RedisStore(url, retries=5, retry_backoff=1.0), name="redis")
    started = time.monotonic()
    with pytest.raises(StoreUnavailable, match="credentials") as caught:
        store.read("s")
    assert time.monotonic() - started < 1.0  # an auth failure is not retried
    assert "s3cr3t" not in _everything_shown(caught.value)
    store.close()


# -- fakeredis: unit-level fault injection ------------------------------------------------

fakeredis = pytest.importorskip("fakeredis")
from fakeredis import FakeRedisConnection  # noqa: E402

HAS_LUA = importlib.util.find_spec("lupa") is not None
needs_lua = pytest.mark.skipif(
    not HAS_LUA, reason="fakeredis runs Lua scripts only with lupa (install fakeredis[lua])"
)


class FlakyConnection(FakeRedisConnection):  # type: ignore[misc]
    """A fake connection whose reply is lost after the fake server ran the command."""

    faults: ClassVar[dict[str, int]] = {}  # command name -> how many replies to lose
    lost: ClassVar[list[str]] = []

    def send_command(self, *args: Any, **kwargs: Any) -> None:
        self._last_command = str(args[0]).upper()
        super().send_command(*args, **kwargs)

    def read_response(self, **kwargs: Any) -> Any:
        response = super().read_response(**kwargs)  # the command did run
        command = getattr(self, "_last_command", "")
        if FlakyConnection.faults.get(command, 0) > 0:
            FlakyConnection.faults[command] -= 1
            FlakyConnection.lost.append(command)
            self.disconnect()
            raise redis.ConnectionError("connection reset by peer (injected)")
        return response


@pytest.fixture
def fake_store() -> Iterator[tuple[RedisStore, Any, Any]]:
    FlakyConnection.faults = {}
    FlakyConnection.lost = []
    server = fakeredis.FakeServer()
    store = RedisStore("redis://fake:6379/0", key_prefix="unit:", **FAST)
    # Unit-level injection: the store's (lazily made) blocking client is a fake one.
    store._client = fakeredis.FakeRedis(
        server=server, connection_class=FlakyConnection, retry=Retry(NoBackoff(), 0)
    )
    yield store, fakeredis.FakeRedis(server=server), server
    store.close()


def test_fake_lost_read_reply_is_retried(fake_store: tuple[RedisStore, Any, Any]) -> None:
    store, raw, _server = fake_store
    log_key = store.keys("s")[0]
    raw.rpush(log_key, b"\x01\x00\x01ahello", b"\x01\x00\x01bworld")
    FlakyConnection.faults = {"LRANGE": 2}
    assert store.read("s") == [Record("a", b"hello"), Record("b", b"world")]
    assert FlakyConnection.lost == ["LRANGE", "LRANGE"]


def test_fake_read_gives_up_after_the_configured_retries(
    fake_store: tuple[RedisStore, Any, Any],
) -> None:
    store, _raw, _server = fake_store
    FlakyConnection.faults = {"LRANGE": 100}
    with pytest.raises(StoreUnavailable, match="read failed 4 time"):
        store.read("s")
    assert FlakyConnection.lost == ["LRANGE"] * 4


def test_fake_unreachable_server_gives_store_unavailable(
    fake_store: tuple[RedisStore, Any, Any],
) -> None:
    store, _raw, server = fake_store
    server.connected = False
    with pytest.raises(StoreUnavailable):
        store.read("s")


@needs_lua
def test_fake_lost_append_reply_neither_loses_nor_duplicates(
    fake_store: tuple[RedisStore, Any, Any],
) -> None:
    store, _raw, _server = fake_store
    store.append("warm-up", batch("x"))  # loads the script, so the next append is EVALSHA
    FlakyConnection.faults = {"EVALSHA": 1}
    store.append("s", batch("a", "b"))
    assert "EVALSHA" in FlakyConnection.lost
    assert store.read("s") == batch("a", "b")
    FlakyConnection.faults = {"EVALSHA": 100, "EVAL": 100}
    with pytest.raises(StoreUnavailable):
        store.append("s", batch("c", "d"))
    FlakyConnection.faults = {}
    store.append("s", batch("c", "d"))  # whether or not it landed, the retry completes it once
    assert store.read("s") == batch("a", "b", "c", "d")


LOOPS = r"""
import asyncio, gc, sys, threading, uuid, warnings
problems = []
warnings.simplefilter("always")
def seen(message, category, *rest):
    problems.append(f"{category.__name__}: {message}")
def unraisable(info):
    problems.append(f"unraisable {info.exc_type.__name__}: {info.exc_value}")
warnings.showwarning = seen
sys.unraisablehook = unraisable
from chatkeep.core import Record, open_store
store = open_store(sys.argv[1])

def one(n):
    async def go():
        await store.aappend(f"s{n}", [Record(uuid.uuid4().hex, b"x")])
        await store.aread(f"s{n}", -1)
    asyncio.run(go())

for n in range(3):
    one(n)
threads = [threading.Thread(target=one, args=(n,)) for n in range(3, 6)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
loop = asyncio.new_event_loop()  # a hand-made loop, closed without asyncio.run
loop.run_until_complete(store.aread("s1", -1))
loop.close()
gc.collect()
store.close()
gc.collect()
print("\n".join(problems))
"""


def test_a_loop_per_call_leaves_no_connection_behind(redis_store_url: str) -> None:
    # asyncio.run per call, loops on threads and a hand-made loop: each loop's connections
    # are closed as the loop closes, so nothing is left to warn "loop is closed" or
    # "unclosed transport" when collected (in a process of its own, so nothing else's
    # garbage is seen).
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-X", "dev", "-c", LOOPS, redis_store_url],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert done.stdout.strip() == "", done.stdout
