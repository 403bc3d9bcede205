"""The requirements table and the shape of the mixins."""

from __future__ import annotations

import inspect

import pytest

from chatkeep.core import CAPABILITIES
from chatkeep.testing import ConformanceBase, StoreConformance, suite
from chatkeep.testing.hooks import TEST_HOOKS
from chatkeep.testing.requirements import (
    CORE,
    HOOK_GROUPS,
    REQUIREMENTS,
    Requirement,
    defining_mixin,
    needs,
    requirement_for,
)

MIXINS = [
    klass
    for klass in StoreConformance.__mro__
    if issubclass(klass, ConformanceBase) and klass not in (ConformanceBase, StoreConformance)
]


def _tests_of(klass: type) -> set[str]:
    return {name for name in vars(klass) if name.startswith("test_")}


def test_every_table_row_names_a_mixin_of_the_suite() -> None:
    names = {klass.__name__ for klass in MIXINS}
    assert set(REQUIREMENTS) <= names


#: Report rows that are not capabilities: features the core builds on the two hooks.
CORE_FEATURE_GROUPS = {"views", "lifecycle"}


def test_every_row_needs_known_capabilities_or_names_a_core_feature() -> None:
    for name, requirement in REQUIREMENTS.items():
        assert requirement.capabilities <= CAPABILITIES, name
        assert requirement.hooks <= set(TEST_HOOKS), name
        assert (
            requirement.capabilities
            or requirement.hooks
            or requirement.group in CORE_FEATURE_GROUPS
        ), f"{name} needs nothing and names no core feature: leave it out of the table"


def test_every_capability_and_test_hook_is_covered() -> None:
    covered = {req.group for req in REQUIREMENTS.values()} - CORE_FEATURE_GROUPS
    assert covered == CAPABILITIES | set(HOOK_GROUPS)
    hooked = {hook for req in REQUIREMENTS.values() for hook in req.hooks}
    assert hooked == set(TEST_HOOKS)


def test_mixins_are_not_collected_on_their_own() -> None:
    for klass in MIXINS:
        assert klass.__name__.endswith("Tests"), klass
        assert not klass.__name__.startswith("Test"), klass
        assert klass.__doc__, f"{klass.__name__} has no docstring"


def test_test_names_are_unique_across_mixins() -> None:
    seen: dict[str, str] = {}
    for klass in MIXINS:
        for name in _tests_of(klass):
            assert name not in seen, f"{name} is in both {seen[name]} and {klass.__name__}"
            seen[name] = klass.__name__


def test_every_mixin_has_tests() -> None:
    for klass in MIXINS:
        assert _tests_of(klass), klass


def test_suite_module_runs_everything() -> None:
    assert issubclass(suite.TestConformance, StoreConformance)
    assert _tests_of(StoreConformance) == set()
    every = set().union(*(_tests_of(klass) for klass in MIXINS))
    assert every == {
        name for name, _ in inspect.getmembers(suite.TestConformance) if name.startswith("test_")
    }


def test_requirement_lookup() -> None:
    assert requirement_for(suite.TestConformance, "test_slices_match_python").group == CORE
    assert requirement_for(suite.TestConformance, "test_delete_survives_reopen") == Requirement(
        "durable", frozenset({"durable", "delete"})
    )
    assert (
        requirement_for(suite.TestConformance, "test_deleted_session_is_not_listed").group
        == "delete"
    )


def test_an_overridden_test_keeps_its_mixins_requirement() -> None:
    class TestMine(StoreConformance):
        @pytest.mark.xfail(reason="known bug")
        def test_async_delete(self) -> None:  # type: ignore[override]
            raise AssertionError

    assert defining_mixin(TestMine, "test_async_delete").__name__ == "DeleteTests"
    assert requirement_for(TestMine, "test_async_delete").capabilities == {"delete"}


def test_a_new_mixin_needs_no_row_to_join_the_core() -> None:
    class BrandNewTests(ConformanceBase):
        def test_something(self) -> None: ...

    class TestExtended(StoreConformance, BrandNewTests):
        pass

    assert requirement_for(TestExtended, "test_something").group == CORE


def test_needs() -> None:
    assert needs("delete", "list_sessions") == Requirement(
        "delete", frozenset({"delete", "list_sessions"})
    )
    assert needs(group="lifecycle") == Requirement("lifecycle")
    with pytest.raises(ValueError):
        needs()
