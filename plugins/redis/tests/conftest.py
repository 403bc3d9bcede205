"""Real Redis servers for the tests: the local one, and a 3-master cluster started here.

- ``redis_url``: ``CHATKEEP_TEST_REDIS_URL``, else ``redis://127.0.0.1:6379/0``. Every
  test run works under its own random namespace, erased at the end.
- ``redis_cluster_url``: a throwaway Redis Cluster of three masters on free loopback ports
  (``redis-server --cluster-enabled yes`` x3 + ``redis-cli --cluster create``), shut down at
  the end. ``CHATKEEP_TEST_REDIS_CLUSTER_URL`` points at an existing cluster instead.

A missing server or binary skips the tests that need it, loudly, outside CI; under
``CI=true`` it fails them.
"""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
import redis
import redis.cluster

from chatkeep.core import redact_url
from chatkeep.testing.services import service_unavailable

DEFAULT_URL = "redis://127.0.0.1:6379/0"


def _missing(reason: str) -> None:
    """Skip (outside CI) or fail (CI=true): a real service is required under CI."""
    service_unavailable(f"Redis: {reason}")


def with_option(url: str, name: str, value: str) -> str:
    """``url`` with one more query parameter."""
    return f"{url}{'&' if '?' in url else '?'}{name}={value}"


def erase_namespace(client: redis.Redis | redis.cluster.RedisCluster, namespace: str) -> None:
    """UNLINK every key under ``namespace`` (glob characters in it escaped)."""
    pattern = "".join("\\" + c if c in "*?[]\\" else c for c in namespace) + "*"
    if isinstance(client, redis.cluster.RedisCluster):
        for node in client.get_primaries():
            node_client = client.get_redis_connection(node)
            for key in node_client.scan_iter(match=pattern, count=1000):
                node_client.unlink(key)
    else:
        for key in client.scan_iter(match=pattern, count=1000):
            client.unlink(key)


def keys_left(url: str) -> list[bytes]:
    """Every key under the ``key_prefix`` of the store URL ``url`` (single server or
    cluster): what a test that deleted all it wrote must leave, nothing."""
    parts = urlsplit(url)
    prefix = parse_qs(parts.query)["key_prefix"][0]
    bare = parts._replace(query="").geturl()
    pattern = "".join("\\" + c if c in "*?[]\\" else c for c in prefix) + "*"
    if bare.startswith("redis+cluster://"):
        cluster = redis.cluster.RedisCluster.from_url(bare.replace("+cluster", "", 1))
        try:
            return sorted(
                key
                for node in cluster.get_primaries()
                for key in cluster.get_redis_connection(node).scan_iter(match=pattern, count=1000)
            )
        finally:
            cluster.close()
    client = redis.Redis.from_url(bare)
    try:
        return sorted(client.scan_iter(match=pattern, count=1000))
    finally:
        client.close()


@pytest.fixture(scope="session")
def redis_keys_left() -> Callable[[str], list[bytes]]:
    """:func:`keys_left`, for test modules (conftest is not importable under importlib)."""
    return keys_left


@pytest.fixture(scope="session")
def redis_url() -> str:
    """The URL of the real single-node Redis under test (no namespace)."""
    url = os.environ.get("CHATKEEP_TEST_REDIS_URL") or DEFAULT_URL
    try:
        client = redis.Redis.from_url(url, socket_connect_timeout=2, socket_timeout=2)
        client.ping()
        client.close()
    except redis.RedisError as exc:
        _missing(f"no Redis answers at {redact_url(url)} ({type(exc).__name__})")
    return url


@pytest.fixture(scope="session")
def redis_run_namespace(redis_url: str) -> Iterator[str]:
    """A namespace unique to this test run; everything under it is erased afterwards."""
    namespace = f"chatkeep-test-{uuid.uuid4().hex[:12]}:"
    yield namespace
    client = redis.Redis.from_url(redis_url)
    erase_namespace(client, namespace)
    client.close()


@pytest.fixture
def redis_namespace(redis_run_namespace: str) -> str:
    """A fresh namespace per test, inside the run's namespace (so the run cleans it up)."""
    return f"{redis_run_namespace}{uuid.uuid4().hex[:8]}:"


@pytest.fixture
def redis_store_url(redis_url: str, redis_namespace: str) -> str:
    """The real Redis URL with this test's namespace."""
    return with_option(redis_url, "key_prefix", redis_namespace)


# -- a throwaway Redis Cluster -------------------------------------------------------------


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _free_cluster_ports(count: int) -> list[int]:
    """Ports P whose cluster bus port P+10000 is free too."""
    ports: list[int] = []
    candidates = list(range(20000, 30000))
    random.shuffle(candidates)
    for port in candidates:
        if _port_free(port) and _port_free(port + 10000):
            ports.append(port)
            if len(ports) == count:
                return ports
    raise RuntimeError("no free ports for a Redis Cluster")


def _wait(condition: object, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if condition():  # type: ignore[operator]
                return
        except (redis.RedisError, OSError):
            pass
        time.sleep(0.1)
    raise RuntimeError(f"timed out waiting for {what}")


class _Cluster:
    """Three masters started as daemons in ``directory``, on ``ports``."""

    def __init__(self, directory: Path, ports: list[int]) -> None:
        self.directory = directory
        self.ports = ports

    def start(self) -> None:
        for port in self.ports:
            subprocess.run(
                [
                    "redis-server",
                    "--port", str(port),
                    "--bind", "127.0.0.1",
                    "--cluster-enabled", "yes",
                    "--cluster-config-file", f"nodes-{port}.conf",
                    "--cluster-node-timeout", "5000",
                    "--save", "",
                    "--appendonly", "no",
                    "--daemonize", "yes",
                    "--dir", str(self.directory),
                    "--pidfile", str(self.directory / f"redis-{port}.pid"),
                    "--logfile", str(self.directory / f"redis-{port}.log"),
                ],
                check=True,
                capture_output=True,
                timeout=30,
            )  # fmt: skip
        for port in self.ports:
            _wait(lambda port=port: redis.Redis(port=port).ping(), 20, f"redis on {port}")
        subprocess.run(
            [
                "redis-cli",
                "--cluster", "create",
                *(f"127.0.0.1:{port}" for port in self.ports),
                "--cluster-replicas", "0",
                "--cluster-yes",
            ],
            check=True,
            capture_output=True,
            timeout=60,
        )  # fmt: skip

        def ready() -> bool:
            for port in self.ports:
                info = redis.Redis(port=port).cluster("info")
                if info.get("cluster_state") != "ok":
                    return False
            return True

        _wait(ready, 30, "cluster_state:ok")

    def stop(self) -> None:
        for port in self.ports:
            pid_file = self.directory / f"redis-{port}.pid"
            pid = int(pid_file.read_text().strip()) if pid_file.exists() else None
            # SHUTDOWN closes the connection instead of answering.
            with contextlib.suppress(redis.RedisError):
                redis.Redis(port=port, socket_timeout=2).shutdown(nosave=True)
            if pid is not None:
                deadline = time.monotonic() + 5
                while time.monotonic() < deadline and _alive(pid):
                    time.sleep(0.05)
                if _alive(pid):
                    os.kill(pid, signal.SIGKILL)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@pytest.fixture(scope="session")
def redis_cluster_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``redis+cluster://`` URL of a real 3-master cluster (no namespace)."""
    existing = os.environ.get("CHATKEEP_TEST_REDIS_CLUSTER_URL")
    if existing:
        yield existing
        return
    if shutil.which("redis-server") is None or shutil.which("redis-cli") is None:
        _missing("redis-server / redis-cli are not installed, so no cluster can be started")
    cluster = _Cluster(tmp_path_factory.mktemp("redis-cluster"), _free_cluster_ports(3))
    try:
        cluster.start()
    except (subprocess.SubprocessError, RuntimeError, OSError) as exc:
        cluster.stop()
        _missing(f"could not start a Redis Cluster: {exc}")
    try:
        yield f"redis+cluster://127.0.0.1:{cluster.ports[0]}"
    finally:
        cluster.stop()


@pytest.fixture
def redis_cluster_store_url(redis_cluster_url: str) -> Iterator[str]:
    """The cluster URL with a fresh namespace, erased after the test."""
    namespace = f"chatkeep-test-{uuid.uuid4().hex[:12]}:"
    yield with_option(redis_cluster_url, "key_prefix", namespace)
    client = redis.cluster.RedisCluster.from_url(redis_cluster_url.replace("+cluster", "", 1))
    erase_namespace(client, namespace)
    client.close()


@pytest.fixture(params=["single", "cluster"])
def any_redis_url(request: pytest.FixtureRequest) -> str:
    """Each test using this runs against the single server and against the cluster."""
    if request.param == "single":
        return str(request.getfixturevalue("redis_store_url"))
    return str(request.getfixturevalue("redis_cluster_store_url"))
