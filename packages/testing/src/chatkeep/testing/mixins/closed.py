"""After ``close()`` (CONTRACT item 4): every hook of that handle raises ``StoreClosed``."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from chatkeep.core import Record, Store, StoreClosed

from ..checks import new_session_id, records
from ._base import ConformanceBase

__all__ = ["ClosedHandleTests", "OptionTests"]


class ClosedHandleTests(ConformanceBase):
    """A closed handle refuses every call with ``StoreClosed``; other handles are fine."""

    def test_every_hook_of_a_closed_handle_raises_store_closed(
        self, chatkeep_open: Callable[..., Store]
    ) -> None:
        store = chatkeep_open()
        session = new_session_id()
        store.append(session, records(1))
        store.close()
        calls: dict[str, Callable[[], object]] = {
            "append": lambda: store.append(session, records(1, "x")),
            "read": lambda: store.read(session),
            "tail read": lambda: store.read(session, -1),
            "aappend": lambda: asyncio.run(store.aappend(session, records(1, "y"))),
            "aread": lambda: asyncio.run(store.aread(session)),
        }
        if store.supports("delete"):
            calls["delete"] = lambda: store.delete(session)
        if store.supports("list_sessions"):
            calls["list_sessions"] = lambda: list(store.list_sessions())
        if store.supports("conditional"):
            calls["append_if"] = lambda: store.append_if(session, [Record("z", b"z")], after=None)
        wrong = {}
        for name, call in calls.items():
            try:
                call()
            except StoreClosed:
                continue
            except Exception as exc:
                wrong[name] = f"{type(exc).__name__}: {exc}"
            else:
                wrong[name] = "no error"
        assert not wrong, f"calls on a closed handle that did not raise StoreClosed: {wrong}"
        store.close()  # still idempotent
        asyncio.run(store.aclose())

    def test_closing_one_handle_does_not_close_another(
        self, chatkeep_open: Callable[..., Store]
    ) -> None:
        first, second = chatkeep_open(), chatkeep_open()
        session = new_session_id()
        second.append(session, records(1))
        first.close()
        second.append(session, records(1, start=1))
        assert second.read(session) == records(2)


class OptionTests(ConformanceBase):
    """Options the backend does not know raise ``InvalidOption``, as keyword or in the URL."""

    def test_unknown_keyword_option_raises_invalid_option(
        self, chatkeep_open: Callable[..., Store]
    ) -> None:
        from chatkeep.core import InvalidOption

        with pytest.raises(InvalidOption, match="chatkeep_no_such_option"):
            chatkeep_open(chatkeep_no_such_option=1)

    def test_unknown_query_option_raises_invalid_option(self, chatkeep_url: str) -> None:
        from chatkeep.core import InvalidOption, open_store

        from ..checks import with_query

        with pytest.raises(InvalidOption, match="chatkeep_no_such_option"):
            open_store(with_query(chatkeep_url, chatkeep_no_such_option="1")).close()
