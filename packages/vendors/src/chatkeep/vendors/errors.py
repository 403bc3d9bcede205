"""The errors of the vendor presets and the client factory.

Each derives from :class:`chatkeep.core.ChatkeepError`, names what was wrong and what to do,
and never shows a key (only the names of the environment variables that hold one).
"""

from __future__ import annotations

from chatkeep.core.errors import ChatkeepError

__all__ = [
    "MissingCredentials",
    "MissingPackage",
    "MissingVendorSetting",
    "UnknownVendor",
    "UnsupportedProtocol",
]


class UnknownVendor(ChatkeepError, LookupError):
    """No vendor preset has this name; the message lists the known ones."""

    def __init__(self, name: str, known: list[str]) -> None:
        self.name = name
        self.known = known
        super().__init__(f"unknown vendor {name!r}; known vendors: {', '.join(known)}")


class UnsupportedProtocol(ChatkeepError, ValueError):
    """The vendor does not offer the requested protocol; the message names the ones it
    does (and every protocol name, ``known``, when the request is not one of them)."""

    def __init__(
        self, vendor: str, protocol: str, offered: tuple[str, ...], known: tuple[str, ...] = ()
    ) -> None:
        self.vendor = vendor
        self.protocol = protocol
        self.offered = offered
        listed = f" (protocols are {', '.join(known)})" if known and protocol not in known else ""
        super().__init__(
            f"{vendor} does not offer the {protocol!r} protocol{listed}; "
            f"it offers {', '.join(offered)}"
        )


class MissingCredentials(ChatkeepError, LookupError):
    """No API key was given and none of the vendor's environment variables is set (the
    message names the variables, never a value)."""

    def __init__(self, vendor: str, variables: tuple[str, ...]) -> None:
        self.vendor = vendor
        self.variables = variables
        super().__init__(
            f"no API key for {vendor}: set {' or '.join(variables)} in the environment "
            "or pass api_key="
        )


class MissingVendorSetting(ChatkeepError, LookupError):
    """A vendor's base URL needs a per-account setting (Azure's resource endpoint) that is
    not in the environment."""

    def __init__(self, vendor: str, variable: str) -> None:
        self.vendor = vendor
        self.variable = variable
        super().__init__(
            f"{vendor} needs your endpoint: set {variable} (e.g. "
            "https://<resource>.openai.azure.com) or pass base_url="
        )


class MissingPackage(ChatkeepError, ImportError):
    """The protocol's client lives in a distribution that is not installed (the message
    says which one to install)."""
