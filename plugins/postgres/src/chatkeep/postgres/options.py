"""Moved to :mod:`chatkeep.postgres.config`; this module re-exports it so that existing
imports keep working."""

from __future__ import annotations

from .config import (
    MAX_NAMESPACE_LENGTH,
    MAX_TABLE_PREFIX_LENGTH,
    PostgresOptions,
    check_identifier,
    parse_url,
    password_forms,
    scrub,
    with_statement_timeout,
)

__all__ = [
    "MAX_NAMESPACE_LENGTH",
    "MAX_TABLE_PREFIX_LENGTH",
    "PostgresOptions",
    "check_identifier",
    "parse_url",
    "password_forms",
    "scrub",
    "with_statement_timeout",
]
