"""Moved: the names live in :mod:`chatkeep.postgres.layout`, the SQL text in
:mod:`chatkeep.postgres.sql` and the migrations in :mod:`chatkeep.postgres.migrate`.

This module re-exports them so that existing imports keep working.
"""

from __future__ import annotations

from .layout import Names
from .migrate import LATEST_VERSION, MIGRATIONS, Migration
from .sql import APPEND_CONFLICT_STATE, RECORD_CONFLICT_STATE, Queries

__all__ = [
    "APPEND_CONFLICT_STATE",
    "LATEST_VERSION",
    "MIGRATIONS",
    "RECORD_CONFLICT_STATE",
    "Migration",
    "Names",
    "Queries",
]
