"""Session ids: hostile but valid ids are kept apart; invalid ones are rejected."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from chatkeep.core import InvalidSessionId, Record, Store

from ..samples import HOSTILE_ID_FRAGMENTS, INVALID_SESSION_IDS
from ._base import ConformanceBase

__all__ = ["HostileIdListingTests", "HostileIdTests", "InvalidIdTests", "hostile_session_ids"]


def hostile_session_ids() -> tuple[str, list[str], list[str]]:
    """A fresh prefix, ids that start with it, and ids that start with a hostile fragment.

    Both placements matter: ``os.path.join(root, "/abs")`` ignores ``root`` only when the
    fragment comes first, and an encoding bug may only bite in the middle of a key.
    """
    run = uuid.uuid4().hex
    prefix = f"ck-h-{run}-"
    suffix = f"-{run}"
    prefixed = [prefix + fragment for fragment in HOSTILE_ID_FRAGMENTS]
    prefixed.append(prefix + "x" * (512 - len(prefix)))
    prefixed.append(prefix + "\U0001f600" * (512 - len(prefix)))
    leading = [fragment + suffix for fragment in HOSTILE_ID_FRAGMENTS]
    return prefix, prefixed, leading


def _fill(store: Store, ids: list[str]) -> None:
    for number, session in enumerate(ids):
        store.append(session, [Record("r", f"{number}".encode())])


class HostileIdTests(ConformanceBase):
    """Ids full of separators, wildcards, quotes, case and normalization variants stay
    distinct sessions."""

    def test_hostile_ids_are_kept_apart(self, chatkeep_store: Store) -> None:
        _prefix, prefixed, leading = hostile_session_ids()
        ids = prefixed + leading
        assert len(set(ids)) == len(ids)
        _fill(chatkeep_store, ids)
        mixed_up = []
        for number, session in enumerate(ids):
            got = chatkeep_store.read(session)
            if got != [Record("r", f"{number}".encode())]:
                mixed_up.append((session, got))
        assert not mixed_up, (
            f"{len(mixed_up)} hostile ids were not kept apart; first: {mixed_up[0][0]!r} "
            f"read {mixed_up[0][1]!r}"
        )

    def test_hostile_ids_do_not_alias_unwritten_ids(self, chatkeep_store: Store) -> None:
        run = uuid.uuid4().hex
        written = [f"ck-a-{run}-a/b", f"ck-a-{run}-Ab", f"ck-a-{run}-\u00e9", f"ck-a-{run}-x y"]
        _fill(chatkeep_store, written)
        for other in [
            f"ck-a-{run}-a%2Fb",
            f"ck-a-{run}-a\\b",
            f"ck-a-{run}-a_b",
            f"ck-a-{run}-ab",
            f"ck-a-{run}-AB",
            f"ck-a-{run}-e\u0301",
            f"ck-a-{run}-x+y",
            f"ck-a-{run}-x%20y",
            f"ck-a-{run}-",
            f"ck-a-{run}-a",
        ]:
            assert chatkeep_store.read(other) == [], f"{other!r} reads another session's data"


class InvalidIdTests(ConformanceBase):
    """Ids that are empty, longer than 512 characters, contain NUL or a lone surrogate, or
    are not ``str`` raise :class:`InvalidSessionId` on every method."""

    @pytest.mark.parametrize("bad", INVALID_SESSION_IDS, ids=lambda bad: repr(bad)[:20])
    def test_invalid_ids_are_rejected(self, chatkeep_store: Store, bad: object) -> None:
        with pytest.raises(InvalidSessionId):
            chatkeep_store.append(bad, [Record("r", b"x")])  # type: ignore[arg-type]
        with pytest.raises(InvalidSessionId):
            chatkeep_store.read(bad)  # type: ignore[arg-type]
        with pytest.raises(InvalidSessionId):
            asyncio.run(chatkeep_store.aappend(bad, [Record("r", b"x")]))  # type: ignore[arg-type]
        with pytest.raises(InvalidSessionId):
            asyncio.run(chatkeep_store.aread(bad))  # type: ignore[arg-type]

    def test_longest_valid_id_is_accepted(self, chatkeep_store: Store) -> None:
        session = ("ck-long-" + uuid.uuid4().hex).ljust(512, "z")
        chatkeep_store.append(session, [Record("r", b"x")])
        assert chatkeep_store.read(session) == [Record("r", b"x")]
        assert chatkeep_store.read(session[:-1]) == []


class HostileIdListingTests(ConformanceBase):
    """``list_sessions`` returns hostile ids exactly as they were written."""

    def test_hostile_ids_are_listed_back_exactly(self, chatkeep_store: Store) -> None:
        prefix, prefixed, _leading = hostile_session_ids()
        _fill(chatkeep_store, prefixed)
        listed = list(chatkeep_store.list_sessions(prefix))
        assert len(listed) == len(set(listed)), "a session was listed twice"
        assert set(listed) == set(prefixed), (
            f"missing: {sorted(set(prefixed) - set(listed))[:3]!r}, "
            f"unexpected: {sorted(set(listed) - set(prefixed))[:3]!r}"
        )

    def test_hostile_ids_work_as_prefixes(self, chatkeep_store: Store) -> None:
        _prefix, _prefixed, leading = hostile_session_ids()
        _fill(chatkeep_store, leading)
        for session in leading:
            listed = list(chatkeep_store.list_sessions(session))
            assert listed == [session], f"prefix {session!r} listed {listed[:3]!r}"
