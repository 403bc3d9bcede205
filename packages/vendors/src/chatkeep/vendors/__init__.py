"""chatkeep-vendors: model vendor presets and the client factory, shared by chatkeep's
chat clients (``chatkeep-openai``, ``chatkeep-anthropic``).

Pure data and lookup; importing it imports no SDK::

    from chatkeep.vendors import get_vendor, make_client, vendors

    get_vendor("deepseek").protocols         # ('chat_completions', 'messages')
    [v.name for v in vendors("responses")]   # ['azure', 'openai', 'qwen']
    client = make_client("deepseek", "chat_completions", "deepseek-chat")  # $DEEPSEEK_API_KEY
"""

from .errors import (
    MissingCredentials,
    MissingPackage,
    MissingVendorSetting,
    UnknownVendor,
    UnsupportedProtocol,
)
from .factory import make_client
from .presets import PROTOCOLS, VENDORS, Protocol, Secret, Vendor, get_vendor, vendors

__all__ = [
    "PROTOCOLS",
    "VENDORS",
    "MissingCredentials",
    "MissingPackage",
    "MissingVendorSetting",
    "Protocol",
    "Secret",
    "UnknownVendor",
    "UnsupportedProtocol",
    "Vendor",
    "get_vendor",
    "make_client",
    "vendors",
]
