"""Worker processes for the cross-process tests: a small fleet started once per test run.

Each worker is a ``spawn``-ed interpreter that reopens stores from their URL alone, exactly
as another process of a user's application would, and carries out commands sent to it:
append batches (optionally at an agreed wall-clock instant, so several workers contend),
race a conditional append, or append and then die without closing anything.

The code lives in an importable module (not in a test file) because ``spawn`` imports the
target function by name in the new interpreter. A worker first takes the ``chatkeep``
namespace folder off ``sys.path`` (see :mod:`chatkeep.testing._paths`): it inherits the
parent's path, which pytest's default import mode may have spoiled.
"""

from __future__ import annotations

import contextlib
import importlib
import itertools
import multiprocessing
import os
import queue
import time
import traceback
import types
from collections.abc import Iterable
from dataclasses import dataclass, field
from importlib import metadata
from multiprocessing.process import BaseProcess
from typing import Any

from ._paths import clean_sys_path

__all__ = ["Outcome", "WorkerFleet", "runtime_plugin_modules"]

#: Seconds a whole command may take before the fleet gives up on the worker.
COMMAND_TIMEOUT = 180.0


def runtime_plugin_modules() -> list[tuple[str, str]]:
    """(name, module) of chatkeep plugins registered in this process at run time rather
    than through an entry point, so a worker can register them again.

    A backend under development is often registered from a conftest with
    ``get_plugin_manager().register(module)``; a spawned worker would not know it otherwise.
    """
    from chatkeep.core.plugins import get_plugin_manager

    from_entry_points = {ep.name for ep in metadata.entry_points(group="chatkeep")}
    found = []
    for name, plugin in get_plugin_manager().list_name_plugin():
        if name == "memory" or name in from_entry_points:
            continue
        if isinstance(plugin, types.ModuleType):
            found.append((name, plugin.__name__))
    return found


@dataclass(frozen=True)
class Outcome:
    """What one command did in a worker: ``status`` is ``"ok"``, ``"error"`` (a chatkeep or
    other exception: ``error_type`` and ``message``) or ``"died"`` (the process is gone)."""

    worker: int
    status: str
    error_type: str = ""
    message: str = ""
    detail: str = field(default="", repr=False)  # the traceback, for failure messages

    @property
    def ok(self) -> bool:
        """Whether the command completed without an exception."""
        return self.status == "ok"

    def describe(self) -> str:
        """One paragraph for an assertion message."""
        if self.status == "ok":
            return f"worker {self.worker}: ok"
        if self.status == "died":
            return f"worker {self.worker} died: {self.message}"
        return f"worker {self.worker} raised {self.error_type}: {self.message}\n{self.detail}"


# -- inside a worker -------------------------------------------------------------------------


class _Worker:
    def __init__(self, plugins: list[tuple[str, str]]) -> None:
        self.plugins: list[tuple[str, str]] = []
        self.stores: dict[tuple[str, tuple[tuple[str, Any], ...]], Any] = {}
        self.register(plugins)

    def register(self, plugins: list[tuple[str, str]]) -> None:
        if plugins == self.plugins:
            return
        from chatkeep.core.plugins import get_plugin_manager, reset_plugins

        # Start from a clean registry so no backend list cached before registration hides them.
        reset_plugins()
        manager = get_plugin_manager()
        for name, module_name in plugins:
            if not manager.has_plugin(name):
                manager.register(importlib.import_module(module_name), name=name)
        self.plugins = list(plugins)

    def store(self, url: str, options: dict[str, Any]) -> Any:
        from chatkeep.core import open_store

        key = (url, tuple(sorted(options.items())))
        store = self.stores.get(key)
        if store is None:
            store = self.stores[key] = open_store(url, **options)
        return store

    def close_all(self) -> None:
        stores, self.stores = self.stores, {}
        for store in stores.values():
            store.close()

    def run(self, command: dict[str, Any]) -> bool:
        """Carry out ``command``; True when the worker must now die (``append_and_die``)."""
        from chatkeep.core import Record

        self.register(command["plugins"])
        op = command["op"]
        if op == "close":
            self.close_all()
            return False
        store = self.store(command["url"], command["options"])
        session = command["session_id"]
        start_at = command.get("start_at")
        if start_at is not None:
            time.sleep(max(0.0, start_at - time.time()))
        if op == "append":
            for batch in command["batches"]:
                store.append(session, [Record(rid, data) for rid, data in batch])
        elif op == "append_if":
            batch = [Record(rid, data) for rid, data in command["records"]]
            store.append_if(session, batch, after=command["after"])
        elif op == "append_and_die":
            for batch in command["batches"]:
                store.append(session, [Record(rid, data) for rid, data in batch])
            return True
        else:
            raise ValueError(f"unknown worker command {op!r}")
        return False


def serve(index: int, plugins: list[tuple[str, str]], commands: Any, results: Any) -> None:
    """A worker's main loop: run each command from ``commands``, report to ``results``."""
    clean_sys_path()
    try:
        worker = _Worker(plugins)
    except BaseException as exc:
        results.put((index, -1, "error", type(exc).__name__, str(exc), traceback.format_exc()))
        return
    while True:
        command = commands.get()
        if command is None:
            break
        job = command["job"]
        try:
            die = worker.run(command)
        except BaseException as exc:
            results.put((index, job, "error", type(exc).__name__, str(exc), traceback.format_exc()))
            continue
        results.put((index, job, "ok", "", "", ""))
        if die:
            # Acknowledged, and then gone: no close(), no flush, no atexit handlers. Only the
            # result queue is flushed first, so the test knows the append returned.
            results.close()
            results.join_thread()
            os._exit(17)
    with contextlib.suppress(Exception):  # shutting down; the test has its results
        worker.close_all()


# -- in the test process ---------------------------------------------------------------------


@dataclass
class _Process:
    process: BaseProcess
    commands: Any


class WorkerFleet:
    """Worker processes, started on first use and reused by every test of a run.

    ``run(commands)`` sends each worker its command (``{index: command}``) and waits for all
    of them; commands carry the URL and options to open, so one fleet serves any store.
    """

    def __init__(self) -> None:
        self._context = multiprocessing.get_context("spawn")
        self._results: Any = None
        self._workers: dict[int, _Process] = {}
        self._jobs = itertools.count()

    def _ensure(self, index: int) -> _Process:
        worker = self._workers.get(index)
        if worker is not None and worker.process.is_alive():
            return worker
        if self._results is None:
            self._results = self._context.Queue()
        commands = self._context.Queue()
        process = self._context.Process(
            target=serve,
            args=(index, runtime_plugin_modules(), commands, self._results),
            name=f"chatkeep-conformance-worker-{index}",
            daemon=True,
        )
        process.start()
        worker = self._workers[index] = _Process(process, commands)
        return worker

    def run(self, commands: dict[int, dict[str, Any]]) -> dict[int, Outcome]:
        """Send ``commands`` (worker index -> command) and return every worker's outcome."""
        plugins = runtime_plugin_modules()
        pending: dict[int, int] = {}
        for index, command in commands.items():
            job = next(self._jobs)
            self._ensure(index).commands.put({**command, "job": job, "plugins": plugins})
            pending[index] = job
        return self._gather(pending)

    def _gather(self, pending: dict[int, int]) -> dict[int, Outcome]:
        outcomes: dict[int, Outcome] = {}
        deadline = time.monotonic() + COMMAND_TIMEOUT
        while pending:
            try:
                index, job, status, error_type, message, detail = self._results.get(timeout=0.2)
            except queue.Empty:
                for index in list(pending):
                    if not self._workers[index].process.is_alive():
                        code = self._workers[index].process.exitcode
                        outcomes[index] = Outcome(index, "died", message=f"exit code {code}")
                        del pending[index]
                if time.monotonic() > deadline:
                    for index in pending:
                        outcomes[index] = Outcome(
                            index, "died", message=f"no answer in {COMMAND_TIMEOUT:.0f} s"
                        )
                        self._stop(index)
                    break
                continue
            if job == -1:  # the worker could not even start
                outcomes[index] = Outcome(index, status, error_type, message, detail)
                pending.pop(index, None)
            elif pending.get(index) == job:
                outcomes[index] = Outcome(index, status, error_type, message, detail)
                del pending[index]
        return outcomes

    def close_stores(self, indexes: Iterable[int] | None = None) -> None:
        """Have the workers close every store they opened (after each test)."""
        live = [
            index
            for index in (self._workers if indexes is None else indexes)
            if index in self._workers and self._workers[index].process.is_alive()
        ]
        if live:
            self.run({index: {"op": "close"} for index in live})

    def _stop(self, index: int) -> None:
        worker = self._workers.pop(index, None)
        if worker is None:
            return
        if worker.process.is_alive():
            worker.process.kill()
        worker.process.join(10)

    def shutdown(self) -> None:
        """Stop every worker."""
        for worker in self._workers.values():
            if worker.process.is_alive():
                worker.commands.put(None)
        for index, worker in list(self._workers.items()):
            worker.process.join(15)
            if worker.process.is_alive():
                self._stop(index)
        self._workers.clear()
        if self._results is not None:
            self._results.close()
            self._results = None
