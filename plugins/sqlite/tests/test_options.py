"""URL forms, option validation, open_store integration and plugin registration."""

from __future__ import annotations

import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import cast

import pytest

from chatkeep.core import Record, StoreUnavailable, open_store
from chatkeep.sqlite import InvalidOption, SQLiteStore
from chatkeep.sqlite.config import SQLiteOptions, parse_options, parse_url
from chatkeep.sqlite.plugin import chatkeep_register_backends


@pytest.mark.parametrize(
    ("url", "path"),
    [
        ("sqlite:///chats.db", "chats.db"),
        ("sqlite:///data/chats.db", "data/chats.db"),
        ("sqlite:////var/lib/chats.db", "/var/lib/chats.db"),
        ("SQLite:///chats.db", "chats.db"),
        ("sqlite:///my%20chats.db", "my chats.db"),
        ("sqlite:///C:/data/chats.db", "C:/data/chats.db"),
        ("sqlite://:memory:", ":memory:"),
        ("sqlite:///:memory:", ":memory:"),
    ],
)
def test_url_forms(url: str, path: str) -> None:
    assert parse_url(url) == (path, {})


def test_url_query_options() -> None:
    assert parse_url("sqlite:///x.db?ttl=60&timeout=2.5") == (
        "x.db",
        {"ttl": "60", "timeout": "2.5"},
    )
    assert parse_url("sqlite://:memory:?ttl=5") == (":memory:", {"ttl": "5"})


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("postgres:///x.db", "not a SQLite URL"),
        ("sqlite:/x.db", "not a SQLite URL"),
        ("sqlite://", "names no file"),
        ("sqlite:///", "names no file"),
        ("sqlite://host/x.db", "no host part"),
        ("sqlite:///x.db?ttl=1&ttl=2", "given twice"),
        ("sqlite:///x.db?ttl", "malformed"),
    ],
)
def test_bad_urls_are_explained(url: str, message: str) -> None:
    with pytest.raises(InvalidOption, match=message):
        parse_url(url)


def test_errors_never_echo_a_password() -> None:
    with pytest.raises(InvalidOption) as caught:
        parse_url("sqlite://user:hunter2@host/x.db")
    assert "hunter2" not in str(caught.value)


def test_option_defaults() -> None:
    assert parse_options({}) == (SQLiteOptions(), None)
    assert SQLiteOptions() == SQLiteOptions(
        ttl=None, timeout=5.0, synchronous="full", journal_mode="wal"
    )


def test_options_from_strings_and_values() -> None:
    options, _ = parse_options(
        {"ttl": "90", "timeout": "0", "synchronous": "FULL", "journal_mode": "Delete"}
    )
    assert options == SQLiteOptions(
        ttl=90.0, timeout=0.0, synchronous="full", journal_mode="delete"
    )
    assert parse_options({"ttl": timedelta(hours=1)})[0].ttl == 3600.0
    assert parse_options({"ttl": "none"})[0].ttl is None


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"tll": "60"}, "unknown SQLite option.*'tll'.*known options: ttl, timeout"),
        ({"timeout": "-1"}, "timeout=.*0 or more"),
        ({"timeout": "soon"}, "timeout"),
        ({"synchronous": "sometimes"}, "synchronous=.*off, normal, full, extra"),
        ({"journal_mode": "memory"}, "journal_mode=.*wal, delete"),
        ({"ttl": "0"}, "ttl=.*greater than 0"),
        ({"clock": 5}, "clock must be a callable"),
    ],
)
def test_invalid_options_are_explained(options: dict[str, object], message: str) -> None:
    with pytest.raises(InvalidOption, match=message):
        parse_options(options)


def test_keyword_options_override_the_query(tmp_path: Path) -> None:
    backend = SQLiteStore.from_url(f"sqlite:///{tmp_path}/x.db?ttl=60&timeout=1", ttl=5)
    assert backend.options.ttl == 5.0 and backend.options.timeout == 1.0
    backend.close()


def test_from_url_rejects_unknown_keywords(tmp_path: Path) -> None:
    with pytest.raises(InvalidOption, match="'path'"):
        SQLiteStore.from_url(f"sqlite:///{tmp_path}/x.db", path="y.db")


def test_missing_directory_is_reported(tmp_path: Path) -> None:
    with pytest.raises(StoreUnavailable, match="directory exists"):
        SQLiteStore(tmp_path / "no" / "such" / "dir" / "x.db")


def test_a_file_that_is_not_a_database_is_reported(tmp_path: Path) -> None:
    bogus = tmp_path / "bogus.db"
    bogus.write_bytes(b"this is not SQLite" * 100)
    with pytest.raises(StoreUnavailable, match="not a database"):
        SQLiteStore(bogus)


def test_journal_mode_delete(tmp_path: Path) -> None:
    with SQLiteStore(tmp_path / "x.db", journal_mode="delete") as backend:
        connection = backend._handle().connection
        assert connection.execute("PRAGMA journal_mode").fetchone() == ("delete",)
        backend.append("s", [Record("a", b"x")])
        assert backend.read("s") == [Record("a", b"x")]


@pytest.mark.usefixtures("only_sqlite_plugin")
def test_open_store_relative_url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with open_store("sqlite:///sub.db?ttl=60") as store:
        store.append("s", [Record("a", b"x")])
        assert store.capabilities == SQLiteStore.capabilities
        assert isinstance(store.backend, SQLiteStore) and store.backend.options.ttl == 60
    assert (tmp_path / "sub.db").exists()


@pytest.mark.usefixtures("only_sqlite_plugin")
def test_open_store_absolute_url_and_by_name(tmp_path: Path) -> None:
    absolute = tmp_path / "abs.db"
    assert str(absolute).startswith("/")
    with open_store("sqlite:///" + str(absolute)) as store:
        store.append("s", [Record("a", b"x")])
    with open_store("sqlite", path=absolute) as store:
        assert store.read("s") == [Record("a", b"x")]
    with open_store("sqlite", url=f"sqlite:///{absolute}") as store:
        assert store.read("s") == [Record("a", b"x")]


@pytest.mark.usefixtures("only_sqlite_plugin")
def test_open_store_memory_declares_fewer_capabilities() -> None:
    with open_store("sqlite://:memory:") as store:
        assert store.capabilities == frozenset(
            {
                "delete",
                "list_sessions",
                "close",
                "ttl",
                "conditional",
                "namespace",
                "recent",
                "fulltext",
            }
        )
        store.append("s", [Record("a", b"x")])
        assert store.read("s") == [Record("a", b"x")]


def test_plugin_registers_a_lazy_factory() -> None:
    calls: list[tuple[tuple[object, ...], dict[str, object]]] = []
    chatkeep_register_backends(register=lambda *args, **kwargs: calls.append((args, kwargs)))
    [(args, kwargs)] = calls
    assert args == ("sqlite", "chatkeep.sqlite.store:SQLiteStore")
    assert kwargs["schemes"] == ["sqlite"]
    assert set(cast("list[str]", kwargs["capabilities"])) == SQLiteStore.capabilities


def test_discovery_does_not_import_the_store() -> None:
    code = (
        "import sys, chatkeep.sqlite.plugin, chatkeep.sqlite; "
        "assert 'chatkeep.sqlite.store' not in sys.modules; "
        "assert 'sqlite_utils' not in sys.modules; "
        "from chatkeep.sqlite import SQLiteStore; "
        "assert 'sqlite_utils' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_namespace_option_from_url_and_keyword(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'tenants.db'}"
    with open_store(url + "?namespace=acme") as acme, open_store(url, namespace="acme/eu") as eu:
        acme.append("s", [Record("a", b"acme")])
        eu.append("s", [Record("a", b"eu")])
        assert acme.read("s") == [Record("a", b"acme")]
        assert eu.read("s") == [Record("a", b"eu")]
        assert "namespace='acme'" in repr(acme.backend)
    with open_store(url + "?namespace=acme", namespace="acme/eu") as overridden:
        assert overridden.read("s") == [Record("a", b"eu")]  # the keyword wins
    for bad in ("", "a//b", "caf\u00e9", "a\x00b"):
        with pytest.raises(InvalidOption, match="namespace"):
            open_store(url, namespace=bad)
