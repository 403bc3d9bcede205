"""example_count: the one place a property test's example count is decided."""

from __future__ import annotations

import pytest

from chatkeep.core.errors import InvalidOption
from chatkeep.testing import example_count
from chatkeep.testing.hypothesis_examples import CI_EXAMPLES, EXAMPLES_VARIABLE


@pytest.fixture(autouse=True)
def _no_override(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(EXAMPLES_VARIABLE, raising=False)


def test_a_local_run_gets_the_count_the_test_asks_for(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    assert example_count(400) == 400
    assert example_count(30) == 30


def test_ci_caps_the_count_and_keeps_smaller_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")
    assert example_count(600) == CI_EXAMPLES == 100
    assert example_count(40) == 40


@pytest.mark.parametrize("ci", ["true", ""])
def test_the_variable_sets_every_count(monkeypatch: pytest.MonkeyPatch, ci: str) -> None:
    monkeypatch.setenv("CI", ci)
    monkeypatch.setenv(EXAMPLES_VARIABLE, "5000")
    assert example_count(30) == 5000
    assert example_count(600) == 5000


@pytest.mark.parametrize("value", ["many", "0", "-3", "1.5"])
def test_a_bad_variable_is_a_one_line_error(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv(EXAMPLES_VARIABLE, value)
    with pytest.raises(InvalidOption, match=EXAMPLES_VARIABLE) as caught:
        example_count(100)
    assert "\n" not in str(caught.value)


def test_a_test_must_ask_for_at_least_one_example() -> None:
    with pytest.raises(InvalidOption, match="at least one"):
        example_count(0)
