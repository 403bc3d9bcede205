"""One module per backend: where its server is, its variants (chatkeep, raw driver,
peers), and how to clean up. Each module has ``setup(context) -> BackendRun``."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ..variants import AnyVariant, Unavailable

__all__ = ["BACKENDS", "BackendRun", "Context", "ServiceMissing", "setup"]

#: Backend name -> module; the default run is sqlite, redis and postgres.
BACKENDS = {
    "sqlite": "chatkeep_bench.backends.sqlite",
    "redis": "chatkeep_bench.backends.redis",
    "postgres": "chatkeep_bench.backends.postgres",
    "s3": "chatkeep_bench.backends.s3",
    "azure_blob": "chatkeep_bench.backends.azure_blob",
}


class ServiceMissing(RuntimeError):
    """The backend's server is not reachable and cannot be started here."""


@dataclass
class Context:
    """What every backend's setup gets."""

    token: str  #: random, in every key, schema, table and file name of this run
    workdir: Path  #: a temporary folder, removed at the end
    peers: bool  #: build the peer rows (``--no-peers`` turns them off)


@dataclass
class BackendRun:
    """A backend ready to measure."""

    name: str
    where: str  #: human description of the server and the throwaway namespace
    variants: list[AnyVariant | Unavailable]
    cleanups: list[Callable[[], None]] = field(default_factory=list)

    def cleanup(self) -> None:
        """Run the cleanups, newest first; one failing does not stop the others."""
        while self.cleanups:
            step = self.cleanups.pop()
            try:
                step()
            except Exception as exc:  # report and go on: the rest must still be cleaned
                print(f"  cleanup of {self.name} failed: {type(exc).__name__}: {exc}")


def setup(name: str, context: Context) -> BackendRun:
    """Set up backend ``name`` (raises :class:`ServiceMissing`)."""
    module = importlib.import_module(BACKENDS[name])
    run: BackendRun = module.setup(context)
    return run
