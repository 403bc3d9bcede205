"""Moved: the model vendor presets are :mod:`chatkeep.vendors` (distribution
``chatkeep-vendors``, installed with ``chatkeep-openai`` and ``chatkeep-anthropic``).

This module re-exports them for code written before the move; import from
``chatkeep.vendors`` instead. The storage core itself knows nothing about model vendors.
"""

from __future__ import annotations

import sys
import types
import warnings
from typing import Any

try:
    from chatkeep.vendors.errors import (
        MissingCredentials,
        MissingVendorSetting,
        UnknownVendor,
        UnsupportedProtocol,
    )
    from chatkeep.vendors.presets import (
        PROTOCOLS,
        VENDORS,
        Protocol,
        Secret,
        Vendor,
        get_vendor,
        vendors,
    )
except ImportError as error:  # pragma: no cover - depends on what is installed
    raise ImportError(
        "chatkeep.core.vendors moved to chatkeep.vendors: pip install chatkeep-vendors "
        "(it comes with chatkeep-openai and chatkeep-anthropic)"
    ) from error

__all__ = [
    "PROTOCOLS",
    "VENDORS",
    "MissingCredentials",
    "MissingVendorSetting",
    "Protocol",
    "Secret",
    "UnknownVendor",
    "UnsupportedProtocol",
    "Vendor",
    "get_vendor",
    "vendors",
]

warnings.warn(
    "chatkeep.core.vendors moved to chatkeep.vendors; import from there",
    DeprecationWarning,
    stacklevel=2,
)


class _CallableModule(types.ModuleType):
    # ``chatkeep.core.vendors`` used to be both this module and, once ``chatkeep.core`` was
    # imported, the ``vendors()`` function; importing the module rebinds the package's
    # attribute to it, so calling it must still work.
    def __call__(self, protocol: str | None = None) -> Any:
        return vendors(protocol)


sys.modules[__name__].__class__ = _CallableModule
