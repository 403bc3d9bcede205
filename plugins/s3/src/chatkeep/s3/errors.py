"""The error the S3 plugin adds to chatkeep's own (:mod:`chatkeep.core.errors`)."""

from __future__ import annotations

from chatkeep.core.backend import StoreUnavailable

__all__ = ["LegacyLayout"]


class LegacyLayout(StoreUnavailable):
    """The session is stored in the key layout of chatkeep-s3 0.1, which this version does
    not read in place. Nothing was read or written.

    Copy the store's sessions to the current layout once with
    ``python -m chatkeep.s3.migrate s3://bucket/prefix?...`` (see the README), or open the
    store with ``legacy_check=False`` to ignore the old data.
    """

    def __init__(self, session_id: str, where: str) -> None:
        self.session_id = session_id
        super().__init__(
            f"session {session_id!r} on {where} is stored in the chatkeep-s3 0.1 layout; "
            "migrate the store once with `python -m chatkeep.s3.migrate URL` "
            "(or pass legacy_check=False to ignore the old data)"
        )
