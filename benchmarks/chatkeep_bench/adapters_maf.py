"""chatkeep-agent-framework's ``ChatkeepHistoryProvider`` next to MAF's own providers.

The rows do exactly the MAF peers' turn (:class:`~chatkeep_bench.peers.MafProvider`:
``get_messages(session_id)[-50:]`` + ``save_messages(session_id, [user, assistant])``, MAF
``Message`` objects in and out) on a chatkeep store of the same backend:

- ``MAF ChatkeepHistoryProvider (max_messages=50)``: how a user configures it; the load
  is a tail read of the session's view.
- ``MAF ChatkeepHistoryProvider (whole session)``: ``max_messages=None``, the same work as
  MAF's providers (load everything, keep the last 50), for a like-for-like comparison.

Both save through MAF's de-duplication rule (a tail read of two messages) and one append.
Hooked into every backend by :func:`chatkeep_bench.backends.setup`; the stores live in the
throwaway place the backend's own module cleans up (its SQLite folder, its PostgreSQL
schema, keys under its Redis prefix), so this module adds no cleanup of its own.
"""

from __future__ import annotations

import os
from typing import Any

from .peers import MafProvider, optional
from .variants import AnyVariant, Kind, Unavailable

__all__ = ["variants"]

PACKAGE = "chatkeep-agent-framework"


class ChatkeepMafProvider(MafProvider):
    """A MAF peer row whose provider is chatkeep's."""

    kind: Kind = "chatkeep"


def _url(backend: str, token: str, workdir: str, tag: str) -> str | None:
    """A chatkeep URL for ``backend`` inside the run's throwaway place (see the backends'
    modules), or ``None`` where the adapter is not measured."""
    if backend == "sqlite":
        return f"sqlite:///{workdir}/sqlite/chatkeep_maf_{tag}.db"
    if backend == "redis":
        base = os.environ.get("CHATKEEP_TEST_REDIS_URL") or "redis://127.0.0.1:6379/0"
        separator = "&" if "?" in base else "?"
        return f"{base}{separator}namespace=ckbench-{token}-maf{tag}:"
    if backend == "postgres":
        base = os.environ.get("CHATKEEP_TEST_POSTGRES_URL") or (
            "postgresql://postgres@127.0.0.1:5432/test"
        )
        separator = "&" if "?" in base else "?"
        return (
            f"{base}{separator}schema=ck_bench_{token}&table_prefix=maf{tag}_"
            f"&application_name=ckbench-{token}"
        )
    return None


def variants(backend: str, token: str, workdir: str) -> list[AnyVariant | Unavailable]:
    """The adapter's rows for ``backend`` (none where it is not measured)."""
    rows: list[AnyVariant | Unavailable] = []
    for tag, max_messages, label in (("w", 50, "max_messages=50"), ("a", None, "whole session")):
        url = _url(backend, token, workdir, tag)
        if url is None:
            continue
        name = f"MAF ChatkeepHistoryProvider ({label})"

        def build(url: str = url, max_messages: int | None = max_messages, name: str = name) -> Any:
            from chatkeep.agent_framework import ChatkeepHistoryProvider

            async def close(provider: Any) -> None:
                await provider.aclose()

            note = (
                "chatkeep's MAF adapter: a tail read of the view, one append"
                if max_messages
                else "chatkeep's MAF adapter loading the whole session, as MAF's own do"
            )
            return ChatkeepMafProvider(
                name,
                lambda: ChatkeepHistoryProvider(url=url, max_messages=max_messages),
                after=close,
                note=note,
            )

        rows.append(optional(name, ["chatkeep.agent_framework"], PACKAGE, build))
    return rows


#: What ``python -m chatkeep_bench.adapters_maf`` keeps of a backend's rows: MAF's own
#: providers, the adapter's, and the references they are read against.
FOCUS = ("MAF ", "chatkeep HistoryProvider", "raw redis.asyncio + json", "raw sqlite3 + json",
         "raw psycopg async + json")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    """The harness (``benchmarks/run.py``, same options) on the MAF rows only, so the
    adapter and MAF's providers can be measured longer, interleaved, without the rest."""
    import run as harness  # benchmarks/run.py, on sys.path when run from benchmarks/

    full_setup = harness.setup

    def focused(name: str, context: Any) -> Any:
        run = full_setup(name, context)
        run.variants = [v for v in run.variants if v.name.startswith(FOCUS)]
        return run

    harness.setup = focused
    status: int = harness.main(argv)
    return status


if __name__ == "__main__":
    import sys

    sys.exit(main())
