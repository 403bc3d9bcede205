"""The policy for tests that need a real service (DESIGN section 7), in one place.

Outside CI a missing service skips its tests loudly, with the reason; with ``CI=true`` it
fails them, so a green CI run always means the real server was tested.
"""

from __future__ import annotations

import os
from typing import NoReturn

import pytest

__all__ = ["in_ci", "service_unavailable"]


def in_ci() -> bool:
    """Whether this run is CI (``CI=true``, any case)."""
    return os.environ.get("CI", "").strip().lower() == "true"


def service_unavailable(message: str) -> NoReturn:
    """Skip the calling test (fail it under ``CI=true``) because a service is missing."""
    if in_ci():
        pytest.fail(f"CI=true and a required service is unavailable: {message}", pytrace=False)
    pytest.skip(f"service unavailable, tests skipped: {message}")
