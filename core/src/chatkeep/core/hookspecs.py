"""The hooks a chatkeep plugin implements (pluggy project ``chatkeep``).

Hooks only ever grow: arguments are added, never renamed or removed. A plugin is a module
or object with functions marked ``@hookimpl``, listed under the ``chatkeep`` entry-point
group of its distribution::

    # my_backend.py
    from chatkeep.core import hookimpl

    @hookimpl
    def chatkeep_register_backends(register):
        register("mystore", "my_backend.store:MyStore", schemes=["mystore"])

    # pyproject.toml
    [project.entry-points.chatkeep]
    mystore = "my_backend"
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Protocol

import pluggy

__all__ = ["RegisterBackend", "chatkeep_register_backends", "hookimpl", "hookspec"]

#: The pluggy project name (also the entry-point group plugins are listed under).
PROJECT = "chatkeep"
#: Marks the hook specifications below (for chatkeep itself).
hookspec = pluggy.HookspecMarker(PROJECT)
#: Marks a plugin's hook implementations: ``@hookimpl def chatkeep_register_backends(...)``.
hookimpl = pluggy.HookimplMarker(PROJECT)


class RegisterBackend(Protocol):
    """The callback :func:`chatkeep_register_backends` receives."""

    def __call__(
        self,
        name: str,
        factory: Callable[..., Any] | str,
        *,
        schemes: Iterable[str] = (),
        capabilities: Iterable[str] | None = None,
        description: str = "",
        wrapper: bool = False,
    ) -> None:
        """Register one backend.

        :param name: what users pass to ``open_store`` (lowercase letters, digits, ``-``,
            ``_``).
        :param factory: the backend class (or any callable taking the options), or a lazy
            ``"module:attribute"`` string so the driver is only imported when the backend is
            opened. A factory with a ``from_url(url, **options)`` classmethod is given URLs
            through it; otherwise it receives ``url=`` among its keyword options.
        :param schemes: URL schemes that select this backend (``name`` is always one).
        :param capabilities: optional capabilities (see
            ``chatkeep.core.backend.CAPABILITIES``); when omitted they are read from the
            factory's ``capabilities`` attribute.
        :param description: one line shown by ``chatkeep backends``.
        :param wrapper: the backend wraps another store and is opened as
            ``<name>+<inner URL>`` (``encrypted+s3://bucket/chats``): its factory's
            ``wrap(open_inner, **options)`` classmethod gets the keyword options and
            ``open_inner(**options)``, which opens the inner URL as ``open_store`` would.
            Its capabilities are read from the object ``wrap`` returns.
        :returns: nothing; an invalid registration raises
            :class:`~chatkeep.core.errors.PluginError`.
        """


@hookspec
def chatkeep_register_backends(register: RegisterBackend) -> None:
    """Register the storage backends this plugin provides by calling ``register``.

    Called once per process, the first time chatkeep needs its list of backends. Import no
    driver here: pass ``factory`` as a ``"module:attribute"`` string.

    :param register: call it once per backend (see :class:`RegisterBackend` for its
        arguments); the core validates and de-duplicates what it is given.
    :returns: nothing (what counts is what was passed to ``register``).
    """
