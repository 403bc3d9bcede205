"""How many examples a Hypothesis property test runs: decided here, for every member.

A test states the count it wants on a developer's machine,
``settings(max_examples=example_count(400))``, and this module decides what it gets:

- ``CHATKEEP_HYPOTHESIS_EXAMPLES=N`` (any run): exactly ``N``, to search harder locally
  (``N=5000``) or to smoke-test quickly (``N=10``);
- under ``CI=true``: at most :data:`CI_EXAMPLES` (100). CI loads Hypothesis's built-in
  ``ci`` profile, which derandomizes generation: every CI run draws the same examples, so
  a larger count re-checks the same fixed set on every run instead of exploring. 100 is
  Hypothesis's own default and its ``ci`` profile's count; counts asked below it stay;
- otherwise: the count the test asked for (random examples, new ones on every run).

No Hypothesis import here: ``chatkeep.testing`` must not import it before pytest starts.
"""

from __future__ import annotations

import os

from chatkeep.core.errors import InvalidOption

from .services import in_ci

__all__ = ["CI_EXAMPLES", "EXAMPLES_VARIABLE", "example_count"]

#: The most examples one property test runs under ``CI=true``.
CI_EXAMPLES = 100
#: The environment variable that sets every property test's count, in CI or not.
EXAMPLES_VARIABLE = "CHATKEEP_HYPOTHESIS_EXAMPLES"


def example_count(local: int) -> int:
    """The ``max_examples`` for a property test that asks for ``local`` examples."""
    if local < 1:
        raise InvalidOption(f"a property test needs at least one example, got {local}")
    chosen = os.environ.get(EXAMPLES_VARIABLE, "").strip()
    if chosen:
        if not chosen.isdigit() or int(chosen) < 1:
            raise InvalidOption(
                f"{EXAMPLES_VARIABLE} must be a whole number of examples above 0, got {chosen!r}"
            )
        return int(chosen)
    return min(local, CI_EXAMPLES) if in_ci() else local
