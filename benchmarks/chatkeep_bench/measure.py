"""The measurements: per-turn latency (interleaved), peak memory of a window load, and
throughput with many concurrent sessions.

Latency is measured in *rounds*: each round, every variant still running does one turn,
in an order shuffled per round, so that whatever else the machine is doing hits all
variants alike. A variant stops after ``turns`` measured turns, or earlier once it has
used its time cap and has ``min_turns`` (slow peers at 10,000 messages), after
``warmup`` unmeasured ones.

Histories: a variant measures a length on a pool of sessions filled to that length before
any turn is measured, using each session for a few turns only, so that a history grows by a
few percent at most while it is measured (see :func:`pool_sessions`).
"""

from __future__ import annotations

import asyncio
import random
import threading
import time
import tracemalloc
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

from .variants import AnyVariant, AsyncVariant, pool_sessions
from .workload import Settings

__all__ = ["Failure", "Runner"]

T = TypeVar("T")


@dataclass
class Failure:
    """A variant that raised: its row shows the error and it is not run again."""

    where: str
    error: str


@dataclass
class _Progress:
    variant: AnyVariant
    index: int
    sessions: int
    per_session: int
    filled: set[int] = field(default_factory=set)
    warm_turns: int = 0
    warm_seconds: float = 0.0
    samples: list[float] = field(default_factory=list)
    measured_seconds: float = 0.0
    turns: int = 0
    last_session: str = ""


class Runner:
    """Runs variants on one event loop (asyncio ones) or directly (blocking ones)."""

    def __init__(self, settings: Settings, token: str) -> None:
        self.settings = settings
        self.token = token
        self.loop = asyncio.new_event_loop()
        self.random = random.Random(settings.seed)
        self.failures: dict[str, Failure] = {}

    # -- calling sync and async variants alike --------------------------------------------

    def call(self, result: T | Awaitable[T]) -> T:
        """The value of a sync call, or of an async call run on the loop."""
        if isinstance(result, Awaitable):
            value: T = self.loop.run_until_complete(_await(cast("Awaitable[T]", result)))
            return value
        return result

    def timed_turn(self, variant: AnyVariant, session_id: str, number: int) -> float:
        """Seconds one turn took (for an async variant, measured inside the loop, so that
        entering the loop is not counted)."""
        if isinstance(variant, AsyncVariant):
            return self.loop.run_until_complete(_timed(variant.turn(session_id, number)))
        started = time.perf_counter()
        variant.turn(session_id, number)
        return time.perf_counter() - started

    def guard(self, variant: AnyVariant, where: str, action: Callable[[], T]) -> T | None:
        """``action()``, or ``None`` after recording the variant's failure."""
        if variant.name in self.failures:
            return None
        try:
            return action()
        except Exception as exc:
            message = f"{type(exc).__name__}: {exc}".splitlines()[0][:160]
            self.failures[variant.name] = Failure(where, message)
            print(f"  ! {variant.name} failed in {where}: {message}", flush=True)
            return None

    def session_id(self, variant_index: int, label: str) -> str:
        """A session id of this run (the token keeps runs and variants apart)."""
        return f"ckbench-{self.token}-v{variant_index}-{label}"

    # -- latency -----------------------------------------------------------------------

    def latency(
        self, variants: list[AnyVariant], length: int
    ) -> tuple[dict[str, list[float]], dict[str, str]]:
        """Per-turn seconds of each variant at history ``length``; and the last session
        each used (for the memory measurement)."""
        settings = self.settings
        planned = settings.turns + settings.warmup
        progress = []
        for index, variant in enumerate(variants):
            if variant.name in self.failures:
                continue
            sessions, per_session = pool_sessions(length, settings.record_budget, planned)
            progress.append(_Progress(variant, index, sessions, per_session))
        # Every session is filled before the first measured turn: a fill (bulk writes,
        # then the server's or SQLite's housekeeping) must not land among measured turns.
        for state in progress:
            for slot in range(state.sessions):
                self._ensure_filled(state, slot, length)
        active = [state for state in progress if state.variant.name not in self.failures]
        while active:
            self.random.shuffle(active)
            for state in list(active):
                if not self._one_turn(state, length):
                    active.remove(state)
        samples = {state.variant.name: state.samples for state in progress}
        last = {state.variant.name: state.last_session for state in progress}
        return samples, last

    def _ensure_filled(self, state: _Progress, slot: int, length: int) -> str:
        session_id = self.session_id(state.index, f"L{length}-{slot}")
        if slot not in state.filled:
            variant = state.variant
            self.guard(
                variant, f"fill {length}", lambda: self.call(variant.fill(session_id, length))
            )
            prepare = getattr(variant, "prepare", None)
            if prepare is not None:  # unmeasured set-up of a filled session (see variants)
                self.guard(variant, f"prepare {length}", lambda: self.call(prepare(session_id)))
            state.filled.add(slot)
        return session_id

    def _one_turn(self, state: _Progress, length: int) -> bool:
        """One turn of ``state``'s variant; False when it is done."""
        settings = self.settings
        variant = state.variant
        if variant.name in self.failures:
            return False
        slot = min(state.turns // state.per_session, state.sessions - 1)
        session_id = self._ensure_filled(state, slot, length)
        number = state.turns
        seconds = self.guard(
            variant, f"turn at {length}", lambda: self.timed_turn(variant, session_id, number)
        )
        if seconds is None:
            return False
        state.turns += 1
        state.last_session = session_id
        warming = state.warm_turns < settings.warmup and (
            state.warm_turns == 0 or state.warm_seconds < settings.variant_seconds / 4
        )
        if warming:
            state.warm_turns += 1
            state.warm_seconds += seconds
            return True
        state.samples.append(seconds)
        state.measured_seconds += seconds
        if len(state.samples) >= settings.turns:
            return False
        spent = state.measured_seconds >= settings.variant_seconds
        return not (spent and len(state.samples) >= settings.min_turns)

    # -- memory ------------------------------------------------------------------------

    def peak_memory(self, variant: AnyVariant, session_id: str) -> int | None:
        """Peak bytes that Python allocated during one window load (tracemalloc; memory
        a C driver allocates outside Python's allocator is not seen)."""
        if variant.name in self.failures or not session_id:
            return None

        def load() -> object:
            return self.call(variant.load(session_id))

        if self.guard(variant, "load", load) is None and variant.name in self.failures:
            return None  # the warm-up load failed
        tracemalloc.start()
        try:
            tracemalloc.reset_peak()
            before, _ = tracemalloc.get_traced_memory()
            loaded = self.guard(variant, "load", load)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        del loaded
        return max(peak - before, 0)

    # -- throughput --------------------------------------------------------------------

    def throughput(self, variant: AnyVariant, index: int) -> float | None:
        """Turns per second of ``threads`` distinct sessions at once: threads for a
        blocking variant, tasks on the loop for an asyncio one."""
        settings = self.settings
        if variant.name in self.failures:
            return None
        count = settings.threads
        sessions = [self.session_id(index, f"T{n}") for n in range(count)]
        for session_id in sessions:
            filled = self.guard(
                variant,
                "throughput fill",
                lambda sid=session_id: self.call(variant.fill(sid, settings.throughput_length)),  # type: ignore[misc]
            )
            if variant.name in self.failures:
                return None
            del filled
        variant.concurrent(count)
        runner = (
            self._async_throughput if isinstance(variant, AsyncVariant) else self._thread_throughput
        )
        result = self.guard(variant, "throughput", lambda: runner(variant, sessions))
        return result

    def _windows(self) -> tuple[float, float]:
        """Seconds of unmeasured load first (pools grow, caches fill), then measured."""
        duration = self.settings.throughput_seconds
        return max(0.1, duration / 4), duration

    def _thread_throughput(self, variant: AnyVariant, sessions: list[str]) -> float:
        warm, duration = self._windows()
        counts = [0] * len(sessions)
        errors: list[BaseException] = []
        barrier = threading.Barrier(len(sessions) + 1)
        marks = [0.0, 0.0]  # measuring from, until

        def worker(slot: int) -> None:
            session_id = sessions[slot]
            barrier.wait()
            number = 0
            try:
                while (now := time.perf_counter()) < marks[1]:
                    variant.turn(session_id, number)
                    number += 1
                    if now >= marks[0]:  # a turn started in the measured window
                        counts[slot] += 1
            except BaseException as exc:  # reported below, in the main thread
                errors.append(exc)

        threads = [threading.Thread(target=worker, args=(n,)) for n in range(len(sessions))]
        for thread in threads:
            thread.start()
        marks[0] = time.perf_counter() + warm
        marks[1] = marks[0] + duration
        barrier.wait()
        for thread in threads:
            thread.join()
        elapsed = time.perf_counter() - marks[0]
        if errors:
            raise errors[0]
        return sum(counts) / elapsed

    def _async_throughput(self, variant: AnyVariant, sessions: list[str]) -> float:
        assert isinstance(variant, AsyncVariant)
        warm, duration = self._windows()

        async def worker(session_id: str, measure_from: float, until: float) -> int:
            number = counted = 0
            while (now := time.perf_counter()) < until:
                await variant.turn(session_id, number)
                number += 1
                if now >= measure_from:
                    counted += 1
            return counted

        async def run() -> float:
            measure_from = time.perf_counter() + warm
            until = measure_from + duration
            tasks = [asyncio.ensure_future(worker(s, measure_from, until)) for s in sessions]
            done, pending = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
            # One task failing must not leave the others running on the loop (holding
            # connections and locks) while the rest of the run goes on.
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
            for task in done:
                error = task.exception()
                if error is not None:
                    raise error
            elapsed = time.perf_counter() - measure_from
            return sum(task.result() for task in tasks) / elapsed

        return self.loop.run_until_complete(run())

    def close(self) -> None:
        """Close the loop (variants are closed by the caller first)."""
        self.loop.run_until_complete(self.loop.shutdown_asyncgens())
        self.loop.close()


async def _await(awaitable: Awaitable[T]) -> T:
    return await awaitable


async def _timed(awaitable: Awaitable[Any]) -> float:
    started = time.perf_counter()
    await awaitable
    return time.perf_counter() - started
