"""The base every conformance mixin shares: the capability gate.

The fixtures the tests use (``chatkeep_url``, ``chatkeep_store``, ``chatkeep_reopen``) come
from the pytest plugin :mod:`chatkeep.testing.pytest_plugin`, so a backend can override
``chatkeep_url`` on its test class, in a module or in a ``conftest.py``.
"""

from __future__ import annotations

import pytest

from chatkeep.core import Store

from ..requirements import requirement_for

__all__ = ["NOT_DECLARED", "NOT_PROVIDED", "ConformanceBase"]

#: Start of the skip reason of a test whose capability the store does not declare.
NOT_DECLARED = "not declared by the store under test: "
#: Start of the skip reason of a test whose test hook the backend does not provide.
NOT_PROVIDED = "not provided by the backend under test: "


class ConformanceBase:
    """Base class of the ``*Tests`` mixins.

    Skips each test whose mixin needs a capability the store does not declare, or a test
    hook its backend does not provide, as listed in
    :data:`chatkeep.testing.requirements.REQUIREMENTS` (the one place that says so).
    """

    @pytest.fixture(autouse=True)
    def _chatkeep_capability_gate(
        self, request: pytest.FixtureRequest, chatkeep_store: Store
    ) -> None:
        requirement = requirement_for(type(self), request.function.__name__)
        missing = requirement.capabilities - chatkeep_store.capabilities
        if missing:
            pytest.skip(NOT_DECLARED + ", ".join(sorted(missing)))
        absent = [hook for hook in requirement.hooks if not hasattr(chatkeep_store.backend, hook)]
        if absent:
            pytest.skip(NOT_PROVIDED + ", ".join(sorted(absent)))
