"""Stores that declare ``namespace`` (CONTRACT item 3): handles opened with
``namespace=...`` see only their own namespace, nested and prefix-of ones included."""

from __future__ import annotations

import uuid
from collections.abc import Callable

import pytest

from chatkeep.core import InvalidOption, Record, Store, fork, read_view

from .._tracking import Tracker
from ..checks import with_query
from ._base import ConformanceBase
from .views import _turn

__all__ = ["NamespaceTests"]

#: Values ``check_namespace`` refuses (CONTRACT item 3).
INVALID_NAMESPACES: tuple[str, ...] = (
    "",
    "/",
    "a/",
    "/a",
    "a//b",
    ".",
    "..",
    "a/./b",
    "a/../b",
    "x" * 129,
    "a b",
    "a\\b",
    "caf\u00e9",
    "a\x00b",
    "a*",
    "a%2Fb",
    "a?b",
)


def _family(opener: Callable[..., Store]) -> dict[str, Store]:
    """Handles on one URL: the default namespace, a namespace, one nested in it, a sibling
    of that, and one the first is a string prefix of (``acme`` vs ``acmecorp``)."""
    base = f"ck-ns-{uuid.uuid4().hex[:12]}.t_x:y"
    return {
        "default": opener(),
        "acme": opener(namespace=base),
        "acme/eu": opener(namespace=f"{base}/eu"),
        "acme/us": opener(namespace=f"{base}/us"),
        "acmecorp": opener(namespace=f"{base}corp"),
    }


def _own(name: str, session: str) -> list[Record]:
    return [Record("r", f"{name}|{session}".encode())]


class NamespaceTests(ConformanceBase):
    """No read, list, append, delete or fork crosses a namespace boundary."""

    def test_same_session_id_in_every_namespace_is_separate(
        self, chatkeep_open: Callable[..., Store]
    ) -> None:
        handles = _family(chatkeep_open)
        sessions = ["s", "eu", "eu/s", "/eu/s", "corp", "corp/s", "us"]
        for name, store in handles.items():
            for session in sessions:
                store.append(session, _own(name, session))
        crossed: list[tuple[str, str, str]] = []
        for name, store in handles.items():
            for session in sessions:
                if store.read(session) != _own(name, session):
                    crossed.append((name, session, repr(store.read(session))))
                if store.read(session, -1) != _own(name, session):
                    crossed.append((name, session, "tail"))
        assert not crossed, f"reads crossed a namespace: {crossed[:3]}"

    def test_a_namespace_reads_nothing_of_the_others(
        self, chatkeep_open: Callable[..., Store]
    ) -> None:
        handles = _family(chatkeep_open)
        handles["acme/eu"].append("only-eu", _own("acme/eu", "only-eu"))
        handles["acme"].append("only-acme", _own("acme", "only-acme"))
        for name, store in handles.items():
            if name != "acme/eu":
                for session in ("only-eu", "eu/only-eu", "/only-eu"):
                    assert store.read(session) == [], f"{name} reads acme/eu's {session!r}"
            if name != "acme":
                assert store.read("only-acme") == [], f"{name} reads acme's session"

    def test_listing_stays_inside_the_namespace(self, chatkeep_open: Callable[..., Store]) -> None:
        handles = _family(chatkeep_open)
        if not handles["acme"].supports("list_sessions"):
            pytest.skip("the store does not declare list_sessions: nothing to list")
        tag = f"mine-{uuid.uuid4().hex[:8]}-"
        for name, store in handles.items():
            store.append(tag + name, _own(name, "x"))
        for name, store in handles.items():
            if name == "default":
                listed = set(store.list_sessions(tag))
            else:
                listed = set(store.list_sessions())
            assert listed == {tag + name}, f"{name} lists {sorted(listed)[:5]}"
            assert set(store.list_sessions(tag + "acme")) <= {tag + name}

    def test_delete_stays_inside_the_namespace(self, chatkeep_open: Callable[..., Store]) -> None:
        handles = _family(chatkeep_open)
        if not handles["acme"].supports("delete"):
            pytest.skip("the store does not declare delete: nothing to delete")
        sessions = ["s", "eu", "eu/s", "corp"]
        for name, store in handles.items():
            for session in sessions:
                store.append(session, _own(name, session))
        acme = handles["acme"]
        for session in [*sessions, "/eu/s", "eu/", "../eu/s", "us"]:
            acme.delete(session)
        for name, store in handles.items():
            for session in sessions:
                expected = [] if name == "acme" else _own(name, session)
                assert store.read(session) == expected, f"{name}'s {session!r} after acme deleted"

    def test_forks_stay_inside_the_namespace(self, chatkeep_open: Callable[..., Store]) -> None:
        handles = _family(chatkeep_open)
        acme, nested = handles["acme"], handles["acme/eu"]
        _turn(acme, "parent", "in acme")
        _turn(nested, "parent", "in acme/eu")
        child = fork(acme, "parent")
        assert [m.text for m in read_view(acme, child)] == ["in acme", "re: in acme"]
        for name, store in handles.items():
            if name != "acme":
                assert store.read(child) == [], f"{name} sees acme's fork"
        assert [m.text for m in read_view(nested, "parent")] == ["in acme/eu", "re: in acme/eu"]

    def test_url_query_and_keyword_select_the_same_namespace(
        self, chatkeep_url: str, chatkeep_tracker: Tracker
    ) -> None:
        chatkeep_open = chatkeep_tracker.open
        namespace = f"ck-ns-{uuid.uuid4().hex[:12]}/q"
        by_keyword = chatkeep_open(namespace=namespace)
        by_keyword.append("s", [Record("r", b"kw")])
        by_query = chatkeep_tracker.open_url(with_query(chatkeep_url, namespace=namespace))
        by_query.append("q", [Record("r", b"q")])
        assert by_query.read("q") == [Record("r", b"q")]
        if not by_keyword.supports("shared"):
            return  # separate handles of a private store share nothing to compare
        assert by_query.read("s") == [Record("r", b"kw")], "?namespace= names another namespace"
        assert by_keyword.read("q") == [Record("r", b"q")]
        # The keyword wins over the query string.
        other = f"ck-ns-{uuid.uuid4().hex[:12]}"
        won = chatkeep_tracker.open_url(
            with_query(chatkeep_url, namespace=namespace), namespace=other
        )
        assert won.read("s") == [], "the namespace= keyword did not win over ?namespace="

    @pytest.mark.parametrize("bad", INVALID_NAMESPACES, ids=lambda bad: repr(bad)[:16])
    def test_invalid_namespaces_raise_invalid_option(
        self, chatkeep_url: str, chatkeep_tracker: Tracker, bad: str
    ) -> None:
        with pytest.raises(InvalidOption):
            chatkeep_tracker.open(namespace=bad)
        if "\x00" not in bad:
            with pytest.raises(InvalidOption):
                chatkeep_tracker.open_url(with_query(chatkeep_url, namespace=bad))
