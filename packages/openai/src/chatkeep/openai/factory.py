"""Moved: ``make_client`` and ``MissingPackage`` are :mod:`chatkeep.vendors` (the vendor
presets and the client factory every chatkeep client shares); re-exported here for code
written before the move."""

from __future__ import annotations

from chatkeep.vendors import MissingPackage, make_client

__all__ = ["MissingPackage", "make_client"]
