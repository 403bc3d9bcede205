"""Moved to :mod:`chatkeep.sqlite.config`; this module re-exports it for code that imported it."""

from __future__ import annotations

from .config import MEMORY, SQLiteOptions, parse_options, parse_url

__all__ = ["MEMORY", "SQLiteOptions", "parse_options", "parse_url"]
