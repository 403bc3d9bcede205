"""``make_client``: a chat client for a vendor preset and a protocol.

::

    from chatkeep.openai import make_client

    make_client("deepseek", "chat_completions", "deepseek-chat")      # $DEEPSEEK_API_KEY
    make_client("deepseek", "messages", "deepseek-chat")              # chatkeep-anthropic
    make_client("qwen", "responses", "qwen-plus")                     # service-managed
    make_client("openai", "responses", "gpt-5-mini", store=False)     # client-managed
    make_client("kimi", "responses", "kimi-k2")  # UnsupportedProtocol: offers chat_completions

The presets are in :mod:`chatkeep.core.vendors`. ``base_url=`` overrides the preset's
address (a proxy, a local server, a test server); ``api_key=`` the key from the
environment. Other keyword arguments go to the client class.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

from chatkeep.core import ChatkeepError
from chatkeep.core.vendors import Vendor, get_vendor

from .chat_completions import ChatCompletionsClient
from .conversations import ConversationsClient
from .responses import ResponsesClient

__all__ = ["MissingPackage", "make_client"]

_OPENAI_PROTOCOLS = {
    "chat_completions": ChatCompletionsClient,
    "responses": ResponsesClient,
    "conversations": ConversationsClient,
}


class MissingPackage(ChatkeepError, ImportError):
    """The protocol's client lives in a distribution that is not installed."""


def _messages_client(model: str, api_key: str, base_url: str, options: dict[str, Any]) -> Any:
    # Imported only when asked for, so chatkeep-openai works without the Anthropic SDK.
    try:
        module = importlib.import_module("chatkeep.anthropic")
    except ImportError as error:
        raise MissingPackage(
            "the 'messages' protocol needs chatkeep-anthropic: pip install 'chatkeep[anthropic]'"
        ) from error
    factory = getattr(module, "AnthropicChatClient", None)
    if factory is None:
        raise MissingPackage("chatkeep.anthropic has no AnthropicChatClient (is it up to date?)")
    return factory(model, api_key=api_key, base_url=base_url, **options)


def make_client(
    vendor: str | Vendor,
    protocol: str,
    model: str,
    *,
    api_key: str | None = None,
    base_url: str | None = None,
    environ: Mapping[str, str] | None = None,
    **options: Any,
) -> Any:
    """A chat client for ``vendor`` (a preset name or :class:`Vendor`) speaking
    ``protocol`` (``chat_completions``, ``responses``, ``conversations``, ``messages``).

    Raises :class:`~chatkeep.core.vendors.UnknownVendor`,
    :class:`~chatkeep.core.vendors.UnsupportedProtocol` (naming what the vendor offers),
    :class:`~chatkeep.core.vendors.MissingCredentials` (naming the environment variables
    to set) or :class:`MissingPackage`. ``options`` go to the client (``store=False``,
    ``options={"temperature": 0}``, ``timeout=...``).
    """
    preset = get_vendor(vendor)
    chosen = preset.require(protocol)
    url = base_url if base_url is not None else preset.base_url_for(chosen, environ=environ)
    key = api_key if api_key is not None else preset.require_api_key(environ=environ)
    if chosen == "messages":
        return _messages_client(model, key, url, options)
    return _OPENAI_PROTOCOLS[chosen](model, api_key=key, base_url=url, **options)
