"""Errors of the Redis backend beyond chatkeep.core's."""

from __future__ import annotations

from chatkeep.core import InvalidOption as CoreInvalidOption

__all__ = ["InvalidOption"]


class InvalidOption(CoreInvalidOption):
    """A Redis URL or option was malformed or out of range.

    A ``ValueError`` (and, for options of the wrong type, a ``TypeError``): the message names
    the option and the accepted forms, and never shows the URL's password.
    """
