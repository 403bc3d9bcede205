"""chatkeep-agent-framework's ``ChatkeepHistoryProvider`` next to MAF's own providers.

The rows do exactly the MAF peers' turn (:class:`~chatkeep_bench.peers.MafProvider`:
``get_messages(session_id)[-50:]`` + ``save_messages(session_id, [user, assistant])``, MAF
``Message`` objects in and out) on a chatkeep store of the same backend:

- ``MAF ChatkeepHistoryProvider (max_messages=50)``: how a user configures it; the load
  is a tail read of the session's view.
- ``MAF ChatkeepHistoryProvider (whole session)``: ``max_messages=None``, the same work as
  MAF's providers (load everything, keep the last 50), for a like-for-like comparison.
- ``MAF ChatkeepHistoryProvider (whole session, cache_bytes=0)``: the same with no view
  kept between turns (every turn reads and decodes the whole view, as before issue 29's
  kept view): what the kept view saves, measured in the same interleaved run.

Both save through MAF's de-duplication rule and one append. :func:`maf_rows` is called
by :func:`chatkeep_bench.adapters.adapter_rows`, with each backend's ``url_for(tag)``
(a store inside the backend's throwaway place, cleaned up with it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .peers import MafProvider, optional
from .variants import AnyVariant, Kind, Unavailable

__all__ = ["maf_rows"]

PACKAGE = "chatkeep-agent-framework"


class ChatkeepMafProvider(MafProvider):
    """A MAF peer row whose provider is chatkeep's."""

    kind: Kind = "chatkeep"


def maf_rows(url_for: Callable[[str], str]) -> list[AnyVariant | Unavailable]:
    """The adapter's two rows for one backend (``url_for(tag)``: a chatkeep URL of its own)."""
    rows: list[AnyVariant | Unavailable] = []
    for tag, max_messages, cache_bytes, label in (
        ("ad-mafw", 50, None, "max_messages=50"),
        ("ad-mafa", None, None, "whole session"),
        ("ad-mafn", None, 0, "whole session, cache_bytes=0"),
    ):
        name = f"MAF ChatkeepHistoryProvider ({label})"

        def build(
            tag: str = tag,
            max_messages: int | None = max_messages,
            cache_bytes: int | None = cache_bytes,
            name: str = name,
        ) -> Any:
            from chatkeep.agent_framework import ChatkeepHistoryProvider

            url = url_for(tag)

            async def close(provider: Any) -> None:
                await provider.aclose()

            note = (
                "chatkeep's MAF adapter: a tail read of the view, one append"
                if max_messages
                else "chatkeep's MAF adapter loading the whole session, as MAF's own do"
                if cache_bytes is None
                else "the same, keeping no view between turns (every turn decodes it all)"
            )
            return ChatkeepMafProvider(
                name,
                lambda: ChatkeepHistoryProvider(
                    url=url,
                    max_messages=max_messages,
                    **({} if cache_bytes is None else {"cache_bytes": cache_bytes}),
                ),
                after=close,
                note=note,
            )

        rows.append(optional(name, ["agent_framework", "chatkeep.agent_framework"], PACKAGE, build))
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
