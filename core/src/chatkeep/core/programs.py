"""Sans-IO programs and the two drivers that carry them out.

Logic that talks to storage is written once, as a *program*: a generator that yields
requests (plain objects the program defines, such as "read these records" or "get this
blob") and is sent back each request's result. It never does I/O itself. A driver carries
the requests out: :func:`run_program` with blocking calls, :func:`arun_program` with
``await``. So the sync and async flavours share every line of logic and make exactly the
same calls, and a test can drive a program against any fake (psycopg's ``generators`` and
``waiting`` modules work the same way)::

    from dataclasses import dataclass
    from chatkeep.core.backend import Program, run_program

    @dataclass
    class Get:
        key: str

    def both(first: str, second: str) -> Program[Get, str]:
        a = yield Get(first)
        b = yield Get(second)
        return a + b

    table = {"x": "1", "y": "2"}
    assert run_program(both("x", "y"), lambda request: table[request.key]) == "12"

When carrying out a request raises one of the exception types given as ``throw`` (every
exception by default), the exception is thrown into the program at its ``yield``, so the
program can handle it, clean up or let it propagate; any other exception closes the
program and propagates from the driver.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator
from typing import Any, TypeAlias, TypeVar

__all__ = ["Program", "arun_program", "run_program"]

Request = TypeVar("Request")
T = TypeVar("T")

#: A program yielding requests of type ``Request`` and returning ``T``; each ``yield``
#: evaluates to the result of carrying out the request it yielded.
Program: TypeAlias = Generator[Request, Any, T]

#: The exception types a driver throws into the program rather than out of it.
Throwable: TypeAlias = type[BaseException] | tuple[type[BaseException], ...]


def run_program(
    program: Program[Request, T],
    perform: Callable[[Request], Any],
    *,
    throw: Throwable = BaseException,
) -> T:
    """Drive ``program`` to completion, carrying out each request with ``perform(request)``.

    :param program: the generator to drive (started here).
    :param perform: carries out one request and returns what the program is sent back.
    :param throw: exception types thrown into the program when ``perform`` raises them;
        others close the program and propagate.
    :returns: the program's return value.
    """
    try:
        request = next(program)
        while True:
            try:
                result = perform(request)
            except throw as error:
                request = program.throw(error)
            except BaseException:
                program.close()
                raise
            else:
                request = program.send(result)
    except StopIteration as finished:
        value: T = finished.value
        return value


async def arun_program(
    program: Program[Request, T],
    perform: Callable[[Request], Awaitable[Any]],
    *,
    throw: Throwable = BaseException,
) -> T:
    """Async :func:`run_program`: each ``perform(request)`` is awaited.

    :param program: the generator to drive (started here).
    :param perform: an async function that carries out one request.
    :param throw: exception types thrown into the program when ``perform`` raises them;
        others close the program and propagate.
    :returns: the program's return value.
    """
    try:
        request = next(program)
        while True:
            try:
                result = await perform(request)
            except throw as error:
                request = program.throw(error)
            except BaseException:
                program.close()
                raise
            else:
                request = program.send(result)
    except StopIteration as finished:
        value: T = finished.value
        return value
