"""``make_client``: a chat client for a vendor preset and a protocol.

::

    from chatkeep.vendors import make_client

    make_client("deepseek", "chat_completions", "deepseek-chat")      # $DEEPSEEK_API_KEY
    make_client("deepseek", "messages", "deepseek-chat")              # chatkeep-anthropic
    make_client("qwen", "responses", "qwen-plus")                     # service-managed
    make_client("openai", "responses", "gpt-5-mini", store=False)     # client-managed
    make_client("kimi", "responses", "kimi-k2")  # UnsupportedProtocol: offers chat_completions

The presets are in :mod:`chatkeep.vendors.presets`. ``base_url=`` overrides the preset's
address (a proxy, a local server, a test server); ``api_key=`` the key from the
environment. Other keyword arguments go to the client class.

The client classes live in their own distributions (``chatkeep-openai`` for Chat
Completions, Responses and Conversations; ``chatkeep-anthropic`` for Messages) and are
imported only when asked for, so this module needs neither SDK.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

from .errors import MissingPackage
from .presets import Protocol, Vendor, get_vendor

__all__ = ["MissingPackage", "make_client"]

#: protocol -> (module, class, the distribution that provides it, the extra of ``chatkeep``)
_CLIENTS: dict[Protocol, tuple[str, str, str, str]] = {
    "chat_completions": ("chatkeep.openai", "ChatCompletionsClient", "chatkeep-openai", "openai"),
    "responses": ("chatkeep.openai", "ResponsesClient", "chatkeep-openai", "openai"),
    "conversations": ("chatkeep.openai", "ConversationsClient", "chatkeep-openai", "openai"),
    "messages": ("chatkeep.anthropic", "AnthropicChatClient", "chatkeep-anthropic", "anthropic"),
}


def _client_class(protocol: Protocol) -> Any:
    module_name, class_name, distribution, extra = _CLIENTS[protocol]
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise MissingPackage(
            f"the {protocol!r} protocol needs {distribution}: pip install 'chatkeep[{extra}]'"
        ) from error
    factory = getattr(module, class_name, None)
    if factory is None:
        raise MissingPackage(f"{module_name} has no {class_name} (is {distribution} up to date?)")
    return factory


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
    """A chat client for ``vendor`` (a preset name or :class:`~chatkeep.vendors.Vendor`)
    speaking ``protocol`` (``chat_completions``, ``responses``, ``conversations``,
    ``messages``).

    :param vendor: a preset name (aliases and any case work) or a :class:`Vendor`.
    :param protocol: the API protocol; the vendor must offer it.
    :param model: the model (or Azure deployment) name.
    :param api_key: the key to use instead of the one in the vendor's environment variable.
    :param base_url: the address to use instead of the preset's.
    :param environ: where keys and settings are read (default: ``os.environ``).
    :param options: passed to the client class (``store=False``,
        ``options={"temperature": 0}``, ``timeout=...``).
    :returns: the client (a ``chatkeep.openai`` or ``chatkeep.anthropic`` class).
    :raises UnknownVendor: for a name no preset has.
    :raises UnsupportedProtocol: naming what the vendor offers.
    :raises MissingCredentials: naming the environment variables to set.
    :raises MissingPackage: when the protocol's client distribution is not installed.
    """
    preset = get_vendor(vendor)
    chosen = preset.require(protocol)
    url = base_url if base_url is not None else preset.base_url_for(chosen, environ=environ)
    key = api_key if api_key is not None else preset.require_api_key(environ=environ)
    return _client_class(chosen)(model, api_key=key, base_url=url, **options)
