"""Moved: the fake model server is :mod:`chatkeep.fake_model` (distribution
``chatkeep-fake-model``), so a backend author installing ``chatkeep-testing`` for the
conformance suite no longer gets an HTTP model server with it.

This module re-exports it for code written before the move
(``pip install 'chatkeep-testing[fake-model]'`` brings it along); import from
``chatkeep.fake_model`` instead.
"""

from __future__ import annotations

import warnings

try:
    from chatkeep.fake_model import FakeModelServer, RecordedRequest, parse_tool_requests
except ImportError as error:  # pragma: no cover - depends on what is installed
    raise ImportError(
        "chatkeep.testing.fake_model moved to chatkeep.fake_model: "
        "pip install chatkeep-fake-model (or 'chatkeep-testing[fake-model]')"
    ) from error

__all__ = ["FakeModelServer", "RecordedRequest", "parse_tool_requests"]

warnings.warn(
    "chatkeep.testing.fake_model moved to chatkeep.fake_model; import from there",
    DeprecationWarning,
    stacklevel=2,
)
