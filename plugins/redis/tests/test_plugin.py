"""The plugin: discovery through the entry point, URL schemes, lazy driver import."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import pytest

from chatkeep.core import backends, open_store
from chatkeep.core.plugins import reset_plugins
from chatkeep.redis import RedisStore

CAPABILITIES = {
    "delete",
    "list_sessions",
    "close",
    "ttl",
    "shared",
    "durable",
    "conditional",
    "namespace",
    "recent",
}


@pytest.fixture(autouse=True)
def only_this_plugin(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    # Load just this distribution's entry point, whatever else is installed beside it.
    monkeypatch.setenv("CHATKEEP_PLUGINS", "redis")
    reset_plugins()
    yield
    reset_plugins()


def test_registered_through_the_entry_point() -> None:
    info = backends()["redis"]
    assert info.distribution == "chatkeep-redis"
    assert set(info.schemes) == {"redis", "rediss", "redis+cluster", "rediss+cluster"}
    assert info.capabilities == CAPABILITIES == RedisStore.capabilities


@pytest.mark.parametrize(
    ("url", "cluster"),
    [
        ("redis://127.0.0.1:1/0", False),
        ("REDIS://127.0.0.1:1/0", False),
        ("rediss://127.0.0.1:1/0", False),
        ("redis+cluster://127.0.0.1:1", True),
        ("rediss+cluster://127.0.0.1:1", True),
    ],
)
def test_every_scheme_opens_a_redis_store(url: str, cluster: bool) -> None:
    store = open_store(url)  # no connection is made until the first command
    assert store.name == "redis"
    assert isinstance(store.backend, RedisStore)
    assert store.backend.is_cluster is cluster
    store.close()


def test_open_by_name_with_options() -> None:
    store = open_store("redis", url="redis://127.0.0.1:1/0", namespace="n", ttl=60)
    backend = store.backend
    assert isinstance(backend, RedisStore)
    assert backend.namespace == "n" and backend.ttl is not None
    store.close()


def test_plugin_discovery_does_not_import_the_driver() -> None:
    code = (
        "import sys, chatkeep.redis.plugin, chatkeep.redis; "
        "assert 'redis' not in sys.modules, 'redis-py imported at discovery'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_listing_backends_and_opening_another_store_do_not_import_the_driver() -> None:
    code = (
        "import sys; from chatkeep.core import backends, open_store; "
        "assert 'redis' in backends(); open_store('memory://').read('s'); "
        "assert 'redis' not in sys.modules, sorted(m for m in sys.modules if 'redis' in m)"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
