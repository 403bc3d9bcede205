"""``chatkeep info``: where the data is. The store URL as resolved (``--url``, else
``$CHATKEEP_URL``, else the default) with its secrets hidden and where it came from, the
backend with its distribution and version, its capabilities, how many sessions it holds
(counted up to :data:`COUNT_LIMIT`, so the cost stays bounded), and for a store kept in a
file (SQLite) the file's path and size (with its write-ahead log). Read-only: it creates and
writes nothing; a store that is not there yet is described as such.
"""

from __future__ import annotations

import json
import os
from typing import Any

from chatkeep.core import backends
from chatkeep.core.urls import redact_url
from chatkeep.core.views import list_conversations

from .stores import StoreChoice, StoreMissing, open_store_for

__all__ = ["COUNT_LIMIT", "describe_store", "run_info"]

#: Sessions are counted up to this many; beyond, the count shows as ``10000+``.
COUNT_LIMIT = 10_000


def _file_of(backend: Any) -> str | None:
    """The database file of a backend kept in one file (SQLite's ``path``), if any."""
    path = getattr(backend, "path", None)
    if not isinstance(path, str) or path == ":memory:":
        return None
    absolute = os.path.abspath(path)
    return absolute if os.path.isfile(absolute) else None


def describe_store(choice: StoreChoice) -> dict[str, Any]:
    """What ``chatkeep info`` prints, as a JSON-ready dict. A store that is not there is
    described as such (``exists: false``), never created."""
    found: dict[str, Any] = {"url": redact_url(choice.url), "from": choice.source}
    try:
        store = open_store_for(choice, read_only=True)
    except StoreMissing as error:
        return {**found, "exists": False, "problem": str(error)}
    try:
        info = backends().get(store.name)
        found.update(
            exists=True,
            backend=store.name,
            distribution=info.distribution if info else None,
            version=info.version if info else None,
            # The backend's, not this read-only handle's (which leaves out the writes).
            capabilities=sorted(info.capabilities if info else store.capabilities),
        )
        if store.supports("list_sessions"):
            count = 0
            for _ in list_conversations(store):
                count += 1
                if count > COUNT_LIMIT:
                    break
            found["sessions"] = min(count, COUNT_LIMIT)
            found["sessions_exact"] = count <= COUNT_LIMIT
        else:
            found["sessions"] = None
        path = _file_of(store.backend)
        if path is not None:
            found["path"] = path
            found["bytes"] = sum(
                os.path.getsize(name) for name in (path, path + "-wal") if os.path.exists(name)
            )
    finally:
        store.close()
    return found


def _size(count: int) -> str:
    value = float(count)
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{count} bytes" if unit == "bytes" else f"{value:.1f} {unit} ({count} bytes)"
        value /= 1024
    raise AssertionError("unreachable")  # pragma: no cover


def run_info(choice: StoreChoice, *, as_json: bool) -> int:
    """Print the description (a store that is not there is described, not an error; one
    that cannot be reached is, exit 2)."""
    found = describe_store(choice)
    if as_json:
        print(json.dumps(found, indent=2))
        return 0
    if not found["exists"]:
        print(f"url:          {found['url']} (from {found['from']})")
        print("exists:       no (nothing was created; the first write creates it)")
        return 0
    sessions = found["sessions"]
    counted = (
        "not listable by this backend"
        if sessions is None
        else f"{sessions}{'' if found['sessions_exact'] else '+'}"
    )
    print(f"url:          {found['url']} (from {found['from']})")
    print(f"backend:      {found['backend']} ({found['distribution']} {found['version']})")
    print(f"capabilities: {', '.join(found['capabilities']) or '-'}")
    print(f"sessions:     {counted}")
    if "path" in found:
        print(f"path:         {found['path']}")
        print(f"size:         {_size(found['bytes'])}")
    return 0
