"""Plugin discovery: backends come from entry points in the ``chatkeep`` group.

Plugins load lazily (the first time a backend is needed) and once per process. Set
``CHATKEEP_PLUGINS`` to a comma-separated list of entry-point names to load only those
(an empty value loads none; the built-in ``memory`` backend is always there).
"""

from __future__ import annotations

import importlib
import os
import re
import threading
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any

import pluggy

from . import hookspecs
from .errors import PluginError, UnknownBackend
from .schemes import suggest_url
from .store import CAPABILITIES, Store
from .urls import redact_url

__all__ = [
    "BackendInfo",
    "backends",
    "get_plugin_manager",
    "open_store",
    "redact_url",
    "reset_plugins",
]

ENTRY_POINT_GROUP = "chatkeep"
DEFAULT_URL = "sqlite:///chatkeep.db"
_NAME = re.compile(r"^[a-z][a-z0-9_-]{0,63}$")
# What open_store takes as a backend name or scheme (redis+cluster) rather than a path.
_NAME_OR_SCHEME = re.compile(r"^[a-z][a-z0-9_+-]{0,63}$")


@dataclass(frozen=True)
class BackendInfo:
    """A registered backend, as ``chatkeep backends`` lists it."""

    name: str
    factory: Callable[..., Any] | str = field(repr=False)
    schemes: tuple[str, ...]
    capabilities: frozenset[str]
    distribution: str
    version: str
    description: str = ""
    #: A wrapper backend (``<name>+<inner URL>``): it is handed the inner store.
    wrapper: bool = False

    def load_factory(self) -> Callable[..., Any]:
        """Import (if given as ``"module:attr"``) and return the backend factory."""
        if not isinstance(self.factory, str):
            return self.factory
        module_name, _, attribute = self.factory.partition(":")
        try:
            target: Any = importlib.import_module(module_name)
            for part in attribute.split("."):
                target = getattr(target, part)
        except (ImportError, AttributeError) as exc:
            raise PluginError(
                f"backend {self.name!r} (from {self.distribution}) could not be loaded: {exc}"
            ) from exc
        if not callable(target):
            raise PluginError(f"backend {self.name!r}: {self.factory!r} is not callable")
        return target  # type: ignore[no-any-return]

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready description."""
        return {
            "name": self.name,
            "distribution": self.distribution,
            "version": self.version,
            "schemes": list(self.schemes),
            "capabilities": sorted(self.capabilities),
            "description": self.description,
            "wrapper": self.wrapper,
        }


class _Registry:
    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.manager: pluggy.PluginManager | None = None
        self.backends: dict[str, BackendInfo] | None = None
        self.schemes: dict[str, str] = {}
        self.origins: dict[str, tuple[str, str]] = {}
        self.broken: dict[str, str] = {}


_registry = _Registry()


def _new_manager() -> pluggy.PluginManager:
    manager = pluggy.PluginManager(hookspecs.PROJECT)
    manager.add_hookspecs(hookspecs)
    from . import memory

    core_version = _version("chatkeep-core")
    manager.register(memory, name="memory")
    _registry.origins["memory"] = ("chatkeep-core", core_version)
    wanted = os.environ.get("CHATKEEP_PLUGINS")
    allowed = None if wanted is None else {n.strip() for n in wanted.split(",") if n.strip()}
    for entry_point in metadata.entry_points(group=ENTRY_POINT_GROUP):
        if allowed is not None and entry_point.name not in allowed:
            continue
        if manager.has_plugin(entry_point.name):
            continue  # the same distribution installed twice on sys.path
        try:
            plugin = entry_point.load()
        except Exception as exc:
            # One broken plugin must not take every other backend down with it: say so
            # loudly now, and fail when someone asks for that backend.
            problem = (
                f"chatkeep plugin {entry_point.name!r} ({entry_point.value}) failed to import: "
                f"{type(exc).__name__}: {exc}"
            )
            _registry.broken[entry_point.name] = problem
            warnings.warn(problem, RuntimeWarning, stacklevel=4)
            continue
        manager.register(plugin, name=entry_point.name)
        dist = entry_point.dist
        _registry.origins[entry_point.name] = (
            dist.name if dist else "unknown",
            dist.version if dist else "unknown",
        )
    try:
        manager.check_pending()
    except pluggy.PluginValidationError as exc:
        raise PluginError(f"a chatkeep plugin implements an unknown hook: {exc}") from exc
    return manager


def _version(distribution: str) -> str:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return "unknown"


def get_plugin_manager() -> pluggy.PluginManager:
    """The process-wide plugin manager, created (and plugins loaded) on first call."""
    with _registry.lock:
        if _registry.manager is None:
            _registry.manager = _new_manager()
        return _registry.manager


def _collect() -> dict[str, BackendInfo]:
    manager = get_plugin_manager()
    found: dict[str, BackendInfo] = {}
    scheme_owner: dict[str, str] = {}
    for impl in manager.hook.chatkeep_register_backends.get_hookimpls():
        origin = _registry.origins.get(impl.plugin_name, (impl.plugin_name, "unknown"))

        def register(
            name: str,
            factory: Callable[..., Any] | str,
            *,
            schemes: Iterable[str] = (),
            capabilities: Iterable[str] | None = None,
            description: str = "",
            wrapper: bool = False,
            _origin: tuple[str, str] = origin,
        ) -> None:
            if not isinstance(name, str) or not _NAME.match(name):
                raise PluginError(f"invalid backend name {name!r} from {_origin[0]}")
            if name in found:
                raise PluginError(
                    f"backend {name!r} registered twice ({found[name].distribution} and "
                    f"{_origin[0]})"
                )
            if capabilities is None:
                declared = getattr(factory, "capabilities", None)
                if declared is None and isinstance(factory, str):
                    declared = ()
                capabilities = declared or ()
            caps = frozenset(capabilities)
            unknown = caps - CAPABILITIES
            if unknown:
                raise PluginError(
                    f"backend {name!r} declares unknown capabilities {sorted(unknown)}"
                )
            all_schemes = tuple(dict.fromkeys([name, *(s.lower() for s in schemes)]))
            for scheme in all_schemes:
                owner = scheme_owner.get(scheme)
                if owner is not None and owner != name:
                    raise PluginError(
                        f"URL scheme {scheme!r} claimed by backends {owner!r} and {name!r}"
                    )
                scheme_owner[scheme] = name
            found[name] = BackendInfo(
                name=name,
                factory=factory,
                schemes=all_schemes,
                capabilities=caps,
                distribution=_origin[0],
                version=_origin[1],
                description=description,
                wrapper=bool(wrapper),
            )

        impl.function(register=register)
    _registry.schemes = scheme_owner
    return found


def backends() -> dict[str, BackendInfo]:
    """Every installed backend by name (loads plugins on first call)."""
    with _registry.lock:
        if _registry.backends is None:
            _registry.backends = _collect()
        return dict(_registry.backends)


def reset_plugins() -> None:
    """Forget loaded plugins so the next call discovers them again (for tests)."""
    with _registry.lock:
        _registry.manager = None
        _registry.backends = None
        _registry.schemes = {}
        _registry.origins = {}
        _registry.broken = {}


def _scheme_of(url: str) -> str:
    return url.split("://", 1)[0].lower()


def _wrapped(installed: dict[str, BackendInfo], url: str) -> tuple[BackendInfo, str] | None:
    """``(wrapper, inner URL)`` for ``<wrapper>+<inner URL>``, if ``url`` is one."""
    scheme = _scheme_of(url)
    head, plus, _ = scheme.partition("+")
    info = installed.get(_registry.schemes.get(head, ""))
    if not plus or info is None or not info.wrapper:
        return None
    return info, url[len(head) + 1 :]


def _open_wrapper(info: BackendInfo, url: str, inner_url: str, options: dict[str, Any]) -> Store:
    factory = info.load_factory()
    wrap = getattr(factory, "wrap", None)
    if wrap is None:
        raise PluginError(
            f"backend {info.name!r} is registered as a wrapper but its factory has no "
            "wrap(open_inner, **options) classmethod"
        )

    def open_inner(**inner_options: Any) -> Store:
        return open_store(inner_url, **inner_options)

    backend = wrap(open_inner, **options)
    capabilities = getattr(backend, "capabilities", None)
    return Store(
        backend,
        name=info.name,
        capabilities=info.capabilities if capabilities is None else capabilities,
        url=url,
    )


def open_store(url_or_name: str | None = None, /, **options: Any) -> Store:
    """Open a store by URL (``"sqlite:///chats.db"``) or by backend name and options
    (``open_store("redis", url="redis://localhost")``).

    With no argument, uses ``CHATKEEP_URL`` or else the embedded SQLite default
    ``sqlite:///chatkeep.db``. Raises :class:`~chatkeep.core.errors.UnknownBackend` (listing
    the installed backends) when nothing matches.

    A wrapper backend composes by URL: ``open_store("encrypted+s3://bucket/chats")`` opens
    the inner store (``s3://bucket/chats``) normally and hands it to the wrapper, whose
    factory's ``wrap(open_inner, **options)`` receives the keyword options and a function
    that opens the inner URL (with the options the wrapper passes on). A scheme registered
    as a whole (``redis+cluster``) is not split.
    """
    if url_or_name is None:
        url_or_name = os.environ.get("CHATKEEP_URL") or DEFAULT_URL
    if not isinstance(url_or_name, str) or not url_or_name:
        raise TypeError("open_store needs a URL or backend name (a non-empty str)")
    installed = backends()
    url: str | None
    if "://" in url_or_name:
        url = url_or_name
        requested = _scheme_of(url)
        name = _registry.schemes.get(requested)
        if name is None:
            wrapped = _wrapped(installed, url)
            if wrapped is not None:
                return _open_wrapper(wrapped[0], url, wrapped[1], options)
    elif not _NAME_OR_SCHEME.match(url_or_name):
        # Not a name: a bare path ("chats.db") or a URL with too few slashes
        # ("sqlite:/chats.db", "redis:/u:pw@h"), never opened as something else. The error
        # shows it (and the URL it probably meant) without its credentials.
        raise UnknownBackend(
            url_or_name.split(":", 1)[0],
            installed,
            given=redact_url(url_or_name),
            suggestion=suggest_url(url_or_name, _registry.schemes),
        )
    else:
        requested = name = url_or_name
        url = options.pop("url", None)
        if name not in installed:
            name = _registry.schemes.get(name)
    if name is None or name not in installed:
        problem = _registry.broken.get(requested) or _registry.broken.get(
            requested.split("+", 1)[0]
        )
        if problem is not None:
            raise PluginError(problem)
        suggestion = None if url is None else suggest_url(url, _registry.schemes)
        raise UnknownBackend(requested, installed, suggestion=suggestion)
    info = installed[name]
    if info.wrapper:
        if url is not None and url.lower().startswith(info.name + "+"):
            return _open_wrapper(info, url, url[len(info.name) + 1 :], options)
        raise PluginError(
            f"{info.name!r} wraps another store: open it as '{info.name}+<inner URL>' "
            f"(for example '{info.name}+sqlite:///chats.db')"
        )
    factory = info.load_factory()
    from_url = getattr(factory, "from_url", None)
    if url is not None and from_url is not None:
        backend = from_url(url, **options)
    elif url is not None:
        backend = factory(url=url, **options)
    else:
        backend = factory(**options)
    capabilities = getattr(backend, "capabilities", None)
    return Store(
        backend,
        name=info.name,
        capabilities=info.capabilities if capabilities is None else capabilities,
        url=url,
    )
