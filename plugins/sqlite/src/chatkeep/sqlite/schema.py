"""Moved: the migrations to :mod:`chatkeep.sqlite.migrations`, the tables and the record
layout to :mod:`chatkeep.sqlite.layout`, the DDL to :mod:`chatkeep.sqlite.sql`. This module
re-exports them for code that imported it."""

from __future__ import annotations

from .migrations import (
    LATEST_VERSION,
    MIGRATIONS,
    VERSION_TABLE,
    Migration,
    migrate,
    schema_version,
)

__all__ = [
    "LATEST_VERSION",
    "MIGRATIONS",
    "VERSION_TABLE",
    "Migration",
    "migrate",
    "schema_version",
]
