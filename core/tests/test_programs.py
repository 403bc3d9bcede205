"""The sans-IO runner: one program, driven blocking and awaiting, with the same calls."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import pytest

from chatkeep.core.backend import Program, arun_program, run_program


@dataclass(frozen=True)
class Get:
    key: str


class Missing(Exception):
    pass


def lookup(keys: list[str], cleanups: list[str]) -> Program[Get, list[str]]:
    """Fetch each key; a Missing key reads as '?'; record that the finally ran."""
    found: list[str] = []
    try:
        for key in keys:
            try:
                found.append((yield Get(key)))
            except Missing:
                found.append("?")
        return found
    finally:
        cleanups.append("closed")


TABLE = {"a": "1", "b": "2"}


def perform(request: Get) -> str:
    if request.key == "boom":
        raise RuntimeError("driver failed")
    if request.key not in TABLE:
        raise Missing(request.key)
    return TABLE[request.key]


async def aperform(request: Get) -> str:
    await asyncio.sleep(0)
    return perform(request)


def test_blocking_and_awaiting_drivers_return_the_same_result_from_the_same_calls() -> None:
    seen: list[Get] = []

    def recording(request: Get) -> str:
        seen.append(request)
        return perform(request)

    async def arecording(request: Get) -> str:
        seen.append(request)
        return await aperform(request)

    assert run_program(lookup(["a", "x", "b"], []), recording) == ["1", "?", "2"]
    sync_calls, seen[:] = list(seen), []
    assert asyncio.run(arun_program(lookup(["a", "x", "b"], []), arecording)) == ["1", "?", "2"]
    assert seen == sync_calls == [Get("a"), Get("x"), Get("b")]


def test_a_program_that_yields_nothing_returns_at_once() -> None:
    def empty() -> Program[Get, int]:
        return 7
        yield Get("never")  # pragma: no cover - makes this a generator

    assert run_program(empty(), perform) == 7
    assert asyncio.run(arun_program(empty(), aperform)) == 7


def test_an_unhandled_failure_is_thrown_into_the_program_and_propagates() -> None:
    cleanups: list[str] = []
    with pytest.raises(RuntimeError, match="driver failed"):
        run_program(lookup(["a", "boom"], cleanups), perform)
    assert cleanups == ["closed"]


def test_only_the_given_exception_types_are_thrown_into_the_program() -> None:
    # Missing is not among `throw`: the program does not see it (no '?'), it is closed
    # (its finally runs) and the driver re-raises.
    cleanups: list[str] = []
    with pytest.raises(Missing):
        run_program(lookup(["a", "x"], cleanups), perform, throw=RuntimeError)
    assert cleanups == ["closed"]

    cleanups = []
    with pytest.raises(Missing):
        asyncio.run(arun_program(lookup(["a", "x"], cleanups), aperform, throw=(RuntimeError,)))
    assert cleanups == ["closed"]

    # A thrown-in type the program handles keeps it running.
    assert run_program(lookup(["x", "a"], []), perform, throw=Missing) == ["?", "1"]


def test_cancelling_the_awaiting_driver_lets_the_program_clean_up() -> None:
    cleanups: list[str] = []

    async def hang(request: Get) -> str:
        await asyncio.sleep(3600)
        return ""

    async def main() -> None:
        task = asyncio.ensure_future(arun_program(lookup(["a"], cleanups), hang))
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert cleanups == ["closed"]
