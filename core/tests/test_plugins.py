"""Backend discovery and selection: open_store, backends(), entry points, redaction."""

from __future__ import annotations

import json
import sys
import types
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any, ClassVar

import pytest

from chatkeep.core import (
    PluginError,
    Record,
    Store,
    UnknownBackend,
    backends,
    hookimpl,
    open_store,
    redact_url,
)
from chatkeep.core.memory import MemoryStore
from chatkeep.core.plugins import get_plugin_manager, reset_plugins

# -- the built-in memory backend ----------------------------------------------------------------


def test_memory_url_opens_a_private_store() -> None:
    first, second = open_store("memory://"), open_store("memory://")
    assert isinstance(first, Store)
    assert first.name == "memory"
    first.append("s", [Record("a", b"1")])
    assert first.read("s") == [Record("a", b"1")]
    assert second.read("s") == []


def test_named_memory_stores_are_shared_within_the_process(memory_url: str) -> None:
    writer, reader = open_store(memory_url), open_store(memory_url + "/")
    writer.append("s", [Record("a", b"1")])
    assert reader.read("s") == [Record("a", b"1")]
    writer.close()  # closing one handle keeps the data for the others
    assert reader.read("s") == [Record("a", b"1")]
    assert open_store(memory_url + "-other").read("s") == []


def test_open_by_name_with_options(memory_url: str) -> None:
    name = memory_url.split("://")[1]
    by_name = open_store("memory", name=name)
    by_url = open_store(memory_url)
    by_name_and_url = open_store("memory", url=memory_url)
    by_name.append("s", [Record("a", b"x")])
    assert by_url.read("s") == by_name_and_url.read("s") == [Record("a", b"x")]
    assert by_name.capabilities == MemoryStore.capabilities


def test_scheme_is_case_insensitive(memory_url: str) -> None:
    open_store(memory_url).append("s", [Record("a", b"")])
    assert open_store("MEMORY://" + memory_url.split("://")[1]).read("s") == [Record("a", b"")]


def test_chatkeep_url_is_the_default(monkeypatch: pytest.MonkeyPatch, memory_url: str) -> None:
    monkeypatch.setenv("CHATKEEP_URL", memory_url)
    open_store().append("s", [Record("a", b"")])
    assert open_store(memory_url).read("s") == [Record("a", b"")]


def test_without_chatkeep_url_the_default_is_sqlite() -> None:
    # No sqlite plugin is loaded in these tests, so the default names what to install.
    with pytest.raises(UnknownBackend) as info:
        open_store()
    assert info.value.requested == "sqlite"
    assert "chatkeep[sqlite]" in str(info.value)


def test_empty_chatkeep_url_means_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CHATKEEP_URL", "")
    with pytest.raises(UnknownBackend, match="'sqlite'"):
        open_store()


@pytest.mark.parametrize("bad", ["", 5, b"memory://"])
def test_open_store_refuses_non_strings(bad: Any) -> None:
    with pytest.raises(TypeError):
        open_store(bad)


@pytest.mark.parametrize(
    ("requested", "name", "hint"),
    [
        ("azure_blob", "azure_blob", "chatkeep[azure-blob]"),
        ("azblob://container/prefix", "azblob", "chatkeep[azure-blob]"),
        ("redis", "redis", "chatkeep[redis]"),
        ("rediss://host", "rediss", "chatkeep[redis]"),
        ("postgresql://host/db", "postgresql", "chatkeep[postgres]"),
        ("encrypted+sqlite:///chats.db", "encrypted+sqlite", "chatkeep[encrypted]"),
    ],
)
def test_unknown_backend_lists_installed_and_how_to_install(
    requested: str, name: str, hint: str
) -> None:
    with pytest.raises(UnknownBackend) as info:
        open_store(requested)
    error = info.value
    assert isinstance(error, LookupError)
    assert error.requested == name
    assert error.installed == ["memory"]
    message = str(error)
    assert "memory" in message
    assert f"pip install '{hint}'" in message


def test_a_backend_chatkeep_does_not_ship_names_no_extra() -> None:
    with pytest.raises(UnknownBackend) as info:
        open_store("memcached://localhost:11211")
    assert "pip install" not in str(info.value)
    assert "third-party backend" in str(info.value)


@pytest.mark.parametrize(
    ("given", "meant"),
    [
        ("chats.db", "sqlite:///chats.db"),
        ("sqlite:/good.db", "sqlite:///good.db"),
        ("redis:/oops", "redis://oops"),
        ("postgress://host/db", "postgres://host/db"),
    ],
)
def test_a_string_that_is_no_url_is_refused_with_what_it_probably_meant(
    given: str, meant: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # "sqlite:/good.db" used to open the sqlite backend's default file instead.
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UnknownBackend) as info:
        open_store(given)
    assert f"did you mean {meant!r}?" in str(info.value)
    assert "chatkeep[chats.db]" not in str(info.value)
    assert list(tmp_path.iterdir()) == []


# -- listing -------------------------------------------------------------------------------------


def test_backends_lists_memory_with_its_origin() -> None:
    listing = backends()
    assert set(listing) == {"memory"}  # CHATKEEP_PLUGINS="" loads no entry points
    info = listing["memory"]
    assert info.name == "memory"
    assert info.distribution == "chatkeep-core"
    assert info.version == metadata.version("chatkeep-core")
    assert info.capabilities == MemoryStore.capabilities
    assert info.schemes == ("memory",)
    as_dict = json.loads(json.dumps(info.as_dict()))
    assert as_dict["name"] == "memory"
    assert as_dict["distribution"] == "chatkeep-core"
    assert as_dict["version"] == info.version
    assert as_dict["capabilities"] == sorted(MemoryStore.capabilities)
    assert as_dict["schemes"] == ["memory"]


def test_backends_returns_a_copy() -> None:
    backends().clear()
    assert "memory" in backends()


# -- throwaway plugins registered on the plugin manager ----------------------------------------


@pytest.fixture
def register_plugin() -> Iterator[Callable[[Callable[..., None]], None]]:
    """Register ``hook(register)`` as a plugin; the registry is reset afterwards."""

    def add(hook: Callable[..., None]) -> None:
        class Plugin:
            @hookimpl
            def chatkeep_register_backends(self, register: Any) -> None:
                hook(register)

        get_plugin_manager().register(Plugin())

    yield add
    reset_plugins()


class ToyBackend:
    """Takes ``url=`` as a keyword (no from_url)."""

    capabilities: ClassVar[frozenset[str]] = frozenset({"durable"})

    def __init__(self, url: str | None = None, **options: Any) -> None:
        self.url = url
        self.options = options

    def append(self, session_id: str, records: list[Record]) -> None: ...

    def read(self, session_id: str, start: int = 0, stop: int | None = None) -> list[Record]:
        return []


def test_registered_backend_is_listed_and_opened(
    register_plugin: Callable[[Callable[..., None]], None],
) -> None:
    register_plugin(
        lambda register: register("toy", ToyBackend, schemes=["toy", "TOYS"], description="a toy")
    )
    info = backends()["toy"]
    assert info.schemes == ("toy", "toys")
    assert info.capabilities == {"durable"}  # read from the class when not given
    assert info.description == "a toy"

    store = open_store("TOYS://host/db", flavour="vanilla")
    assert store.name == "toy"
    assert isinstance(store.backend, ToyBackend)
    assert store.backend.url == "TOYS://host/db"
    assert store.backend.options == {"flavour": "vanilla"}
    assert store.capabilities == {"durable"}

    by_name = open_store("toy", url="toy://x", flavour="plain")
    assert isinstance(by_name.backend, ToyBackend)
    assert by_name.backend.url == "toy://x"
    assert by_name.backend.options == {"flavour": "plain"}


def test_lazy_factory_string_is_imported_only_when_opened(
    register_plugin: Callable[[Callable[..., None]], None],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    module = f"chatkeep_lazy_{uuid.uuid4().hex}"
    (tmp_path / f"{module}.py").write_text(
        "from chatkeep.core.memory import MemoryStore\n"
        "class Nested:\n"
        "    class Store(MemoryStore):\n"
        "        pass\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    register_plugin(
        lambda register: register(
            "lazy", f"{module}:Nested.Store", capabilities=["delete", "list_sessions"]
        )
    )
    info = backends()["lazy"]
    assert module not in sys.modules  # discovery does not import the driver
    assert info.capabilities == {"delete", "list_sessions"}
    store = open_store("lazy://")
    assert module in sys.modules
    assert type(store.backend).__qualname__ == "Nested.Store"
    sys.modules.pop(module, None)


def test_lazy_factory_that_fails_to_import_names_the_backend(
    register_plugin: Callable[[Callable[..., None]], None],
) -> None:
    register_plugin(lambda register: register("broken", "no_such_module_for_chatkeep:Thing"))
    assert "broken" in backends()  # listing still works
    with pytest.raises(PluginError, match="'broken'"):
        open_store("broken://x")


def test_lazy_factory_that_is_not_callable_is_refused(
    register_plugin: Callable[[Callable[..., None]], None],
) -> None:
    register_plugin(lambda register: register("notcallable", "chatkeep.core.memory:__doc__"))
    with pytest.raises(PluginError, match="not callable"):
        open_store("notcallable")


@pytest.mark.parametrize(
    ("hook", "match"),
    [
        (lambda r: r("memory", ToyBackend), "registered twice"),
        (lambda r: r("other", ToyBackend, schemes=["memory"]), "claimed by"),
        (lambda r: r("toy", ToyBackend, capabilities=["delete", "teleport"]), "teleport"),
        (lambda r: r("Bad Name", ToyBackend), "invalid backend name"),
        (lambda r: r("", ToyBackend), "invalid backend name"),
        (lambda r: (r("twin", ToyBackend), r("twin", ToyBackend)), "registered twice"),
    ],
)
def test_invalid_registrations_raise_plugin_error(
    register_plugin: Callable[[Callable[..., None]], None],
    hook: Callable[..., None],
    match: str,
) -> None:
    register_plugin(hook)
    with pytest.raises(PluginError, match=match):
        backends()
    with pytest.raises(PluginError):
        open_store("memory://")  # a broken plugin set is reported, not half-used


# -- entry points ----------------------------------------------------------------------------


@dataclass
class FakeDist:
    name: str
    version: str


class FakeEntryPoint:
    """What ``importlib.metadata.entry_points`` yields, with a controllable ``load``."""

    def __init__(self, name: str, load: Callable[[], Any], dist: str = "chatkeep-fake") -> None:
        self.name = name
        self.value = f"{dist.replace('-', '_')}.plugin"
        self.group = "chatkeep"
        self.dist = FakeDist(dist, "9.8.7")
        self._load = load
        self.loads = 0

    def load(self) -> Any:
        self.loads += 1
        return self._load()


@pytest.fixture
def fake_entry_points(monkeypatch: pytest.MonkeyPatch) -> Callable[..., None]:
    """Make ``entry_points(group="chatkeep")`` return exactly the given fakes."""

    def install(*points: FakeEntryPoint, allow: str | None = None) -> None:
        def entry_points(**selection: Any) -> list[FakeEntryPoint]:
            assert selection == {"group": "chatkeep"}
            return list(points)

        monkeypatch.setattr(metadata, "entry_points", entry_points)
        if allow is None:
            monkeypatch.delenv("CHATKEEP_PLUGINS", raising=False)
        else:
            monkeypatch.setenv("CHATKEEP_PLUGINS", allow)
        reset_plugins()

    return install


def _plugin_module(name: str, hook_name: str = "chatkeep_register_backends") -> types.ModuleType:
    module = types.ModuleType(name)

    @hookimpl(specname=None)
    def hook(register: Any) -> None:
        register(name, ToyBackend, schemes=[name])

    hook.__name__ = hook_name
    setattr(module, hook_name, hook)
    return module


def test_entry_point_plugin_is_listed_with_its_distribution(
    fake_entry_points: Callable[..., None],
) -> None:
    point = FakeEntryPoint("fakedb", lambda: _plugin_module("fakedb"), dist="chatkeep-fakedb")
    fake_entry_points(point)
    info = backends()["fakedb"]
    assert info.distribution == "chatkeep-fakedb"
    assert info.version == "9.8.7"
    assert isinstance(open_store("fakedb://x").backend, ToyBackend)
    backends()
    open_store("fakedb")
    assert point.loads == 1  # plugins load once per process


def test_plugins_load_lazily(fake_entry_points: Callable[..., None]) -> None:
    point = FakeEntryPoint("fakedb", lambda: _plugin_module("fakedb"))
    fake_entry_points(point)
    assert point.loads == 0  # nothing happens until a backend is needed
    backends()
    assert point.loads == 1


def test_chatkeep_plugins_limits_which_plugins_load(
    fake_entry_points: Callable[..., None],
) -> None:
    def explode() -> Any:
        raise AssertionError("a plugin not listed in CHATKEEP_PLUGINS was imported")

    wanted = FakeEntryPoint("wanted", lambda: _plugin_module("wanted"))
    unwanted = FakeEntryPoint("unwanted", explode)
    fake_entry_points(wanted, unwanted, allow=" wanted , ")
    assert set(backends()) == {"memory", "wanted"}
    assert unwanted.loads == 0


def test_misspelled_hook_fails_loudly(fake_entry_points: Callable[..., None]) -> None:
    module = _plugin_module("typo", hook_name="chatkeep_register_backend")
    fake_entry_points(FakeEntryPoint("typo", lambda: module))
    with pytest.raises(PluginError, match="chatkeep_register_backend"):
        backends()


def test_plugin_that_fails_to_import_is_named_and_spares_the_others(
    fake_entry_points: Callable[..., None],
) -> None:
    def load() -> Any:
        raise ImportError("No module named 'exotic_driver'")

    fake_entry_points(
        FakeEntryPoint("exotic", load, dist="chatkeep-exotic"),
        FakeEntryPoint("fakedb", lambda: _plugin_module("fakedb")),
    )
    with pytest.warns(RuntimeWarning, match="exotic_driver"):
        installed = backends()
    assert set(installed) == {"memory", "fakedb"}  # the healthy plugin still works
    assert isinstance(open_store("fakedb://x").backend, ToyBackend)
    for requested in ("exotic://somewhere", "exotic", "exotic+cluster://x"):
        with pytest.raises(PluginError) as info:
            open_store(requested)
        message = str(info.value)
        assert "'exotic'" in message
        assert "chatkeep_exotic.plugin" in message
        assert "exotic_driver" in message


# -- secrets never shown -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("redis://user:hunter2@host:6379/0", "redis://user:***@host:6379/0"),
        ("redis://:hunter2@host:6379", "redis://:***@host:6379"),
        (
            "postgresql://u:p%40ss@db/chat?sslmode=require",
            "postgresql://u:***@db/chat?sslmode=require",
        ),
        ("postgresql://u@db/chat?password=hunter2", "postgresql://u@db/chat?password=***"),
        (
            "https://acct.blob.core.windows.net/c?sv=2024&sig=hunter2&se=x",
            "https://acct.blob.core.windows.net/c?sv=2024&sig=***&se=x",
        ),
        ("s3://bucket/p?aws_secret_access_key=hunter2", "s3://bucket/p?aws_secret_access_key=***"),
        ("x://h/?token=hunter2&api_key=hunter2", "x://h/?token=***&api_key=***"),
        ("x://h/?AccountKey=hunter2", "x://h/?AccountKey=***"),
    ],
)
def test_redact_url_hides_secrets(url: str, expected: str) -> None:
    redacted = redact_url(url)
    assert redacted == expected
    assert "hunter2" not in redacted
    assert "p%40ss" not in redacted


@pytest.mark.parametrize(
    "url",
    [
        "memory://",
        "memory://shared",
        "redis://localhost:6379/0",
        "postgresql://user@db.example.com:5432/chat",
        "https://example.com/path?a=1&b=2",
        "sqlite:///chats.db",
        "sqlite:////abs/path/chats.db",
        "sqlite:///chats.db?mode=ro",
        "sqlite:///:memory:?cache=shared",
    ],
)
def test_redact_url_leaves_plain_urls_unchanged(url: str) -> None:
    assert redact_url(url) == url


def test_redact_url_hides_passwords_with_unescaped_slashes() -> None:
    # Generated passwords often contain "/" or "+" (base64); users paste them unescaped.
    redacted = redact_url("redis://default:ab/cd+ef@cache.example.com:6379")
    assert "ab/cd" not in redacted
    assert "cd+ef" not in redacted


def test_store_repr_never_shows_a_password(memory_url: str) -> None:
    name = memory_url.split("://")[1]
    store = open_store(f"memory://admin:hunter2@{name}")
    assert "hunter2" not in repr(store)
    assert store.url is not None
    assert "hunter2" not in store.url
    assert "memory" in repr(store)


def test_store_built_directly_never_shows_a_password() -> None:
    store = Store(MemoryStore(), name="redis", url="redis://user:hunter2@host:6379")
    assert "hunter2" not in repr(store)
    assert "hunter2" not in str(store.url)


def test_unknown_backend_error_never_shows_a_password() -> None:
    # A URL typed with one slash too few is not recognised as a URL; its password must still
    # stay out of the error message.
    with pytest.raises(UnknownBackend) as info:
        open_store("redis:/user:hunter2@host:6379")
    assert "hunter2" not in str(info.value)
    with pytest.raises(UnknownBackend) as info:
        open_store("nosuch://user:hunter2@host")
    assert "hunter2" not in str(info.value)


# -- wrapper backends --------------------------------------------------------------------


class Reversing:
    """A toy wrapper: stores each record's data reversed in the inner store."""

    def __init__(self, inner: Store, marker: str) -> None:
        self.inner = inner
        self.marker = marker
        self.capabilities = inner.capabilities & {"list_sessions", "namespace"}

    @classmethod
    def wrap(cls, open_inner: Callable[..., Store], *, marker: str = "", **rest: Any) -> Any:
        return cls(open_inner(**rest), marker)

    def append(self, session_id: str, records: list[Record]) -> None:
        self.inner.append(session_id, [Record(r.id, r.data[::-1]) for r in records])

    def read(self, session_id: str, start: int = 0, stop: int | None = None) -> list[Record]:
        return [Record(r.id, r.data[::-1]) for r in self.inner.read(session_id, start, stop)]

    def list_sessions(self, prefix: str | None = None) -> Any:
        return self.inner.list_sessions(prefix)


def test_a_wrapper_composes_by_url_and_sees_only_the_inner_store(
    register_plugin: Callable[[Callable[..., None]], None],
) -> None:
    register_plugin(lambda register: register("reversed", Reversing, wrapper=True))
    assert backends()["reversed"].wrapper is True
    name = f"wrapped-{id(register_plugin)}"
    store = open_store(f"reversed+memory://{name}", marker="m", namespace="acme")
    assert store.name == "reversed" and store.url == f"reversed+memory://{name}"
    backend = store.backend
    assert isinstance(backend, Reversing) and backend.marker == "m"
    assert store.capabilities == {"list_sessions", "namespace"}  # what wrap() returned says
    store.append("s", [Record("a", b"abc")])
    assert store.read("s") == [Record("a", b"abc")]
    raw = open_store(f"memory://{name}", namespace="acme")  # options reached the inner store
    assert raw.read("s") == [Record("a", b"cba")]
    twice = open_store(f"reversed+reversed+memory://{name}", namespace="acme")
    assert twice.read("s") == [Record("a", b"cba")]  # wrappers of wrappers


def test_a_wrapper_needs_an_inner_url_and_a_wrap_method(
    register_plugin: Callable[[Callable[..., None]], None],
) -> None:
    register_plugin(lambda register: register("reversed", Reversing, wrapper=True))
    register_plugin(lambda register: register("nowrap", ToyBackend, wrapper=True))
    with pytest.raises(PluginError, match=r"reversed\+<inner URL>"):
        open_store("reversed")
    with pytest.raises(UnknownBackend, match="nosuch"):
        open_store("reversed+nosuch://x")
    with pytest.raises(PluginError, match="wrap"):
        open_store("nowrap+memory://")


def test_schemes_registered_whole_are_not_split(
    register_plugin: Callable[[Callable[..., None]], None],
) -> None:
    register_plugin(lambda register: register("reversed", Reversing, wrapper=True))
    register_plugin(lambda register: register("toy", ToyBackend, schemes=["reversed+toy"]))
    store = open_store("reversed+toy://h")
    assert isinstance(store.backend, ToyBackend)  # the whole scheme wins over the split


def test_a_wrapper_url_with_a_password_is_shown_redacted(
    register_plugin: Callable[[Callable[..., None]], None],
) -> None:
    register_plugin(lambda register: register("reversed", Reversing, wrapper=True))
    register_plugin(lambda register: register("toy", ToyBackend))
    store = open_store("reversed+toy://app:hunter2@db/x")
    assert "hunter2" not in repr(store) and "hunter2" not in str(store.url)
