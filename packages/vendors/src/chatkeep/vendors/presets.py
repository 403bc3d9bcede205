"""Model vendors: where each one is, which API protocols it speaks, where its key is.

Pure data and lookup; no SDK is imported here (:func:`chatkeep.vendors.make_client` builds
a client from a preset)::

    from chatkeep.vendors import get_vendor

    deepseek = get_vendor("deepseek")
    deepseek.protocols                  # ('chat_completions', 'messages')
    deepseek.base_url_for("messages")   # 'https://api.deepseek.com/anthropic'
    deepseek.base_url_for("responses")  # UnsupportedProtocol (it offers chat_completions, messages)
    deepseek.api_key()                  # $DEEPSEEK_API_KEY, as a Secret (its repr is redacted)

The table follows the vendors' public documentation as summarized in the seeds (April
2026): Chat Completions is the common protocol, Responses is offered by OpenAI, Azure
OpenAI and Qwen (DashScope), and Anthropic's Messages protocol by Anthropic and, through
compatible endpoints, DeepSeek, GLM, MiniMax and Xiaomi MiMo. Vendors change their offers;
pass ``base_url=`` to a client to use an endpoint this table does not know.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from .errors import MissingCredentials, MissingVendorSetting, UnknownVendor, UnsupportedProtocol

__all__ = [
    "PROTOCOLS",
    "VENDORS",
    "Protocol",
    "Secret",
    "Vendor",
    "get_vendor",
    "vendors",
]

#: An API protocol: how history is sent and who keeps it.
#: ``chat_completions`` (client-managed), ``responses`` (service-managed with
#: ``store=True``, forkable by response id; client-managed with ``store=False``),
#: ``conversations`` (service-managed, linear; built on Responses) and ``messages``
#: (Anthropic Messages, client-managed).
Protocol = Literal["chat_completions", "responses", "conversations", "messages"]

#: Every protocol name, in a stable order.
PROTOCOLS: tuple[Protocol, ...] = ("chat_completions", "responses", "conversations", "messages")

_PLACEHOLDER = re.compile(r"\{([A-Z][A-Z0-9_]*)\}")


class Secret(str):
    """An API key: a ``str`` (SDKs use it as is) whose ``repr`` never shows the value, so
    it cannot leak through a log line, a traceback's locals or a dataclass repr."""

    source: str

    def __new__(cls, value: str, source: str = "") -> Secret:
        """``source`` says where the key came from (an environment variable's name)."""
        secret = super().__new__(cls, value)
        secret.source = source
        return secret

    def __repr__(self) -> str:
        where = f" from {self.source}" if self.source else ""
        return f"<secret{where}>"


@dataclass(frozen=True)
class Vendor:
    """A vendor preset: its name, the base URL of each protocol it offers and the
    environment variables holding its API key (the first one set wins).

    A base URL is what the vendor's SDK client takes as ``base_url``; it may contain an
    ``{ENV_VAR}`` placeholder filled from the environment (Azure's per-resource endpoint).
    ``base_url_env`` names an environment variable that, when set, overrides the base URL
    of every protocol (``OPENAI_BASE_URL``, as the official SDK does).
    """

    name: str
    display_name: str
    base_urls: Mapping[Protocol, str]
    api_key_env: tuple[str, ...]
    base_url_env: str | None = None
    aliases: tuple[str, ...] = ()
    notes: str = ""
    docs: Mapping[str, str] = field(default_factory=dict)

    @property
    def protocols(self) -> tuple[Protocol, ...]:
        """The protocols this vendor offers, in :data:`PROTOCOLS` order."""
        return tuple(p for p in PROTOCOLS if p in self.base_urls)

    def supports(self, protocol: str) -> bool:
        """Whether the vendor offers ``protocol``."""
        return protocol in self.base_urls

    def require(self, protocol: str) -> Protocol:
        """``protocol`` if the vendor offers it, else :class:`UnsupportedProtocol`."""
        for known in self.protocols:
            if known == protocol:
                return known
        raise UnsupportedProtocol(self.display_name, protocol, self.protocols, PROTOCOLS)

    def base_url_for(self, protocol: str, *, environ: Mapping[str, str] | None = None) -> str:
        """The SDK base URL for ``protocol``.

        Raises :class:`UnsupportedProtocol` (naming the offered ones) when the vendor does
        not speak it, and :class:`MissingVendorSetting` when the URL needs a setting that
        is not in ``environ`` (default: ``os.environ``).
        """
        known = self.require(protocol)
        env = os.environ if environ is None else environ
        if self.base_url_env and env.get(self.base_url_env):
            return env[self.base_url_env]
        template = self.base_urls[known]

        def fill(match: re.Match[str]) -> str:
            value = env.get(match.group(1), "").strip()
            if not value:
                raise MissingVendorSetting(self.display_name, match.group(1))
            return value.rstrip("/")

        return _PLACEHOLDER.sub(fill, template)

    def api_key(self, *, environ: Mapping[str, str] | None = None) -> Secret | None:
        """The API key from the first of :attr:`api_key_env` that is set, or ``None``."""
        env = os.environ if environ is None else environ
        for variable in self.api_key_env:
            value = env.get(variable)
            if value:
                return Secret(value, variable)
        return None

    def require_api_key(self, *, environ: Mapping[str, str] | None = None) -> Secret:
        """:meth:`api_key`, or :class:`MissingCredentials` naming the variables to set."""
        key = self.api_key(environ=environ)
        if key is None:
            raise MissingCredentials(self.display_name, self.api_key_env)
        return key


_OPENAI_V1 = "https://api.openai.com/v1"
_AZURE_V1 = "{AZURE_OPENAI_ENDPOINT}/openai/v1"
_DASHSCOPE = "https://dashscope.aliyuncs.com/compatible-mode/v1"

#: Every preset, by canonical name.
VENDORS: Mapping[str, Vendor] = {
    vendor.name: vendor
    for vendor in (
        Vendor(
            "openai",
            "OpenAI",
            {
                "chat_completions": _OPENAI_V1,
                "responses": _OPENAI_V1,
                "conversations": _OPENAI_V1,
            },
            ("OPENAI_API_KEY",),
            base_url_env="OPENAI_BASE_URL",
            notes="originator of Chat Completions, Responses and Conversations",
            docs={"api": "https://platform.openai.com/docs/api-reference"},
        ),
        Vendor(
            "azure",
            "Azure OpenAI",
            {
                "chat_completions": _AZURE_V1,
                "responses": _AZURE_V1,
                "conversations": _AZURE_V1,
            },
            ("AZURE_OPENAI_API_KEY",),
            aliases=("azure-openai", "azure_openai"),
            notes=(
                "the v1 API of your resource (AZURE_OPENAI_ENDPOINT); model = deployment name; "
                "Conversations is listed in the v1 reference but not yet enabled everywhere"
            ),
            docs={"api": "https://learn.microsoft.com/azure/ai-foundry/openai/latest"},
        ),
        Vendor(
            "deepseek",
            "DeepSeek",
            {
                "chat_completions": "https://api.deepseek.com",
                "messages": "https://api.deepseek.com/anthropic",
            },
            ("DEEPSEEK_API_KEY",),
            docs={"api": "https://api-docs.deepseek.com"},
        ),
        Vendor(
            "qwen",
            "Qwen (Alibaba Cloud DashScope)",
            {"chat_completions": _DASHSCOPE, "responses": _DASHSCOPE},
            ("DASHSCOPE_API_KEY",),
            aliases=("dashscope", "alibaba", "tongyi"),
            notes="Responses supports previous_response_id (service-managed, forkable)",
            docs={"api": "https://help.aliyun.com/zh/model-studio/"},
        ),
        Vendor(
            "kimi",
            "Kimi (Moonshot AI)",
            {"chat_completions": "https://api.moonshot.cn/v1"},
            ("MOONSHOT_API_KEY", "KIMI_API_KEY"),
            aliases=("moonshot",),
            docs={"api": "https://platform.moonshot.cn/docs"},
        ),
        Vendor(
            "glm",
            "GLM (Zhipu AI)",
            {
                "chat_completions": "https://open.bigmodel.cn/api/paas/v4",
                "messages": "https://open.bigmodel.cn/api/anthropic",
            },
            ("ZHIPUAI_API_KEY", "GLM_API_KEY"),
            aliases=("zhipu", "zhipuai", "bigmodel"),
            docs={"api": "https://open.bigmodel.cn/dev/api"},
        ),
        Vendor(
            "minimax",
            "MiniMax",
            {
                "chat_completions": "https://api.minimaxi.com/v1",
                "messages": "https://api.minimaxi.com/anthropic",
            },
            ("MINIMAX_API_KEY",),
            notes="Messages is the vendor's recommended protocol",
            docs={"api": "https://platform.minimaxi.com/document"},
        ),
        Vendor(
            "mimo",
            "Xiaomi MiMo",
            {
                "chat_completions": "https://api.xiaomimimo.com/v1",
                "messages": "https://api.xiaomimimo.com/anthropic",
            },
            ("MIMO_API_KEY",),
            aliases=("xiaomi", "xiaomi-mimo"),
            docs={"api": "https://platform.xiaomimimo.com/docs"},
        ),
        Vendor(
            "anthropic",
            "Anthropic",
            {"messages": "https://api.anthropic.com"},
            ("ANTHROPIC_API_KEY",),
            base_url_env="ANTHROPIC_BASE_URL",
            aliases=("claude",),
            notes="originator of the Messages protocol",
            docs={"api": "https://docs.anthropic.com/en/api/messages"},
        ),
    )
}

_BY_ALIAS: dict[str, str] = {
    alias: vendor.name for vendor in VENDORS.values() for alias in (vendor.name, *vendor.aliases)
}


def get_vendor(name: str | Vendor) -> Vendor:
    """The preset named ``name`` (case-insensitive; aliases such as ``"moonshot"`` or
    ``"dashscope"`` work); a :class:`Vendor` is returned as is. Unknown names raise
    :class:`UnknownVendor`, which lists the known ones."""
    if isinstance(name, Vendor):
        return name
    canonical = _BY_ALIAS.get(name.strip().lower())
    if canonical is None:
        raise UnknownVendor(name, sorted(VENDORS))
    return VENDORS[canonical]


def vendors(protocol: str | None = None) -> list[Vendor]:
    """Every preset (only those offering ``protocol``, when given), sorted by name."""
    return [
        vendor
        for _, vendor in sorted(VENDORS.items())
        if protocol is None or vendor.supports(protocol)
    ]
