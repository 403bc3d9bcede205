"""Option validation that needs no server: schema names and namespaces."""

from __future__ import annotations

import pytest

from chatkeep.core import InvalidOption
from chatkeep.postgres import PostgresOptions
from chatkeep.postgres.config import parse_url


@pytest.mark.parametrize("schema", ["pg_catalog", "pg_toast", "pg_anything", "information_schema"])
def test_reserved_schemas_are_refused(schema: str) -> None:
    with pytest.raises(InvalidOption, match="reserves"):
        PostgresOptions(schema=schema)


@pytest.mark.parametrize("schema", ["chatkeep", "public", "app_1", "_private", "pgx"])
def test_ordinary_schemas_are_accepted(schema: str) -> None:
    assert PostgresOptions(schema=schema).schema == schema


@pytest.mark.parametrize("namespace", ["acme", "acme/eu", "app:prod", "a.b_c-d"])
def test_valid_namespaces(namespace: str) -> None:
    assert PostgresOptions(namespace=namespace).namespace == namespace


INVALID = ["", "/", "a//b", "..", "a b", "caf\u00e9", "a\x00b", "x" * 129]


@pytest.mark.parametrize("namespace", INVALID)
def test_invalid_namespaces_are_refused(namespace: str) -> None:
    with pytest.raises(InvalidOption, match="namespace"):
        PostgresOptions(namespace=namespace)


def test_the_default_namespace_is_none() -> None:
    assert PostgresOptions().namespace is None


@pytest.mark.parametrize(
    "query",
    ["options=-c%20synchronous_commit%3Doff", "options=-c+synchronous_commit%3Doff"],
)
def test_libpq_options_with_a_space_reach_libpq_whole(query: str) -> None:
    params, _ = parse_url(f"postgresql://u@127.0.0.1/test?{query}", {})
    assert params["options"] == "-c synchronous_commit=off"
