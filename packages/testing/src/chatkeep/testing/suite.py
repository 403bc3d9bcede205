"""The conformance suite as a collectable test module, for third parties::

    pytest --pyargs chatkeep.testing.suite --chatkeep-url mystore://...

pytest collects this module only when it is named like that (its file name does not match
``test_*.py``), so installing chatkeep-testing adds no tests to other projects.
"""

from __future__ import annotations

from .conformance import StoreConformance

__all__ = ["TestConformance"]


class TestConformance(StoreConformance):
    """The full suite against the store at ``--chatkeep-url``."""
