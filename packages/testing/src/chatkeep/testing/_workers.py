"""Code that runs in the worker processes of the cross-process tests.

It lives in an importable module (not in a test file) because the ``spawn`` start method
imports the target function by name in a fresh interpreter. A worker reopens the store from
its URL alone, exactly as another process of a user's application would.
"""

from __future__ import annotations

import importlib
import traceback
import types
from importlib import metadata
from typing import Any

from chatkeep.core import open_store
from chatkeep.core.plugins import get_plugin_manager, reset_plugins

from .checks import plan_batches

__all__ = ["append_plan", "runtime_plugin_modules"]


def runtime_plugin_modules() -> list[tuple[str, str]]:
    """(name, module) of chatkeep plugins registered in this process at run time rather
    than through an entry point, so a worker can register them again.

    A backend under development is often registered from a conftest with
    ``get_plugin_manager().register(module)``; a spawned worker would not know it otherwise.
    """
    from_entry_points = {ep.name for ep in metadata.entry_points(group="chatkeep")}
    found = []
    for name, plugin in get_plugin_manager().list_name_plugin():
        if name == "memory" or name in from_entry_points:
            continue
        if isinstance(plugin, types.ModuleType):
            found.append((name, plugin.__name__))
    return found


def _register(plugins: list[tuple[str, str]]) -> None:
    if not plugins:
        return
    # Start from a clean registry so no backend list cached before registration hides them.
    reset_plugins()
    manager = get_plugin_manager()
    for name, module_name in plugins:
        if not manager.has_plugin(name):
            manager.register(importlib.import_module(module_name), name=name)


def append_plan(
    url: str,
    *,
    plugins: list[tuple[str, str]],
    session_id: str,
    writer: str,
    batches: int,
    per_batch: int,
    start: Any,
    results: Any,
) -> None:
    """Open the store at ``url``, wait for the other writers at ``start`` (a barrier), append
    this writer's planned batches to ``session_id``, and report to ``results`` (a queue):
    ``(writer, None)`` on success, ``(writer, traceback_text)`` on failure."""
    try:
        _register(plugins)
        store = open_store(url)
        try:
            start.wait(120)
            for batch in plan_batches(writer, batches, per_batch):
                store.append(session_id, batch)
        finally:
            store.close()
    except BaseException:
        results.put((writer, traceback.format_exc()))
    else:
        results.put((writer, None))
