"""A pytest plugin (loaded with ``-p``) that presses Ctrl-C during the third test."""

from __future__ import annotations

import pytest

_seen: list[str] = []


def pytest_configure(config: pytest.Config) -> None:
    _seen.clear()  # the module stays imported between in-process runs


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_call(item: pytest.Item) -> None:
    _seen.append(item.nodeid)
    if len(_seen) == 3:
        raise KeyboardInterrupt
