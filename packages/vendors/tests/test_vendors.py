"""Vendor presets (chatkeep.vendors) and ``make_client``."""

from __future__ import annotations

import asyncio
import pickle

import pytest

from chatkeep.core import ChatkeepError, Message
from chatkeep.fake_model import FakeModelServer
from chatkeep.openai import ChatCompletionsClient, ConversationsClient, ResponsesClient
from chatkeep.vendors import (
    PROTOCOLS,
    VENDORS,
    MissingCredentials,
    MissingVendorSetting,
    Secret,
    UnknownVendor,
    UnsupportedProtocol,
    Vendor,
    get_vendor,
    make_client,
    vendors,
)

# What the seeds' table says (plus Conversations, which is OpenAI's and Azure's v1 API).
EXPECTED = {
    "openai": ("chat_completions", "responses", "conversations"),
    "azure": ("chat_completions", "responses", "conversations"),
    "deepseek": ("chat_completions", "messages"),
    "qwen": ("chat_completions", "responses"),
    "kimi": ("chat_completions",),
    "glm": ("chat_completions", "messages"),
    "minimax": ("chat_completions", "messages"),
    "mimo": ("chat_completions", "messages"),
    "anthropic": ("messages",),
}


def test_every_vendor_of_the_table_offers_exactly_its_protocols() -> None:
    assert {name: vendor.protocols for name, vendor in VENDORS.items()} == EXPECTED


@pytest.mark.parametrize(
    ("name", "protocol", "url"),
    [
        ("openai", "responses", "https://api.openai.com/v1"),
        ("deepseek", "chat_completions", "https://api.deepseek.com"),
        ("deepseek", "messages", "https://api.deepseek.com/anthropic"),
        ("qwen", "responses", "https://dashscope.aliyuncs.com/compatible-mode/v1"),
        ("kimi", "chat_completions", "https://api.moonshot.cn/v1"),
        ("glm", "chat_completions", "https://open.bigmodel.cn/api/paas/v4"),
        ("minimax", "messages", "https://api.minimaxi.com/anthropic"),
        ("mimo", "chat_completions", "https://api.xiaomimimo.com/v1"),
        ("mimo", "messages", "https://api.xiaomimimo.com/anthropic"),
        ("anthropic", "messages", "https://api.anthropic.com"),
    ],
)
def test_base_urls(name: str, protocol: str, url: str) -> None:
    assert get_vendor(name).base_url_for(protocol, environ={}) == url


def test_asking_for_a_protocol_the_vendor_lacks_names_the_ones_it_offers() -> None:
    with pytest.raises(UnsupportedProtocol) as raised:
        get_vendor("kimi").base_url_for("responses")
    assert str(raised.value) == (
        "Kimi (Moonshot AI) does not offer the 'responses' protocol; it offers chat_completions"
    )
    assert raised.value.offered == ("chat_completions",)
    assert isinstance(raised.value, ChatkeepError) and isinstance(raised.value, ValueError)
    with pytest.raises(UnsupportedProtocol, match=r"protocols are chat_completions, responses"):
        get_vendor("deepseek").require("graphql")
    with pytest.raises(UnsupportedProtocol, match="offers messages"):
        get_vendor("anthropic").require("chat_completions")


def test_names_are_case_insensitive_with_aliases_and_unknown_names_list_known_ones() -> None:
    assert get_vendor("Moonshot") is VENDORS["kimi"]
    assert get_vendor("DashScope") is VENDORS["qwen"]
    assert get_vendor("zhipu") is VENDORS["glm"]
    assert get_vendor(VENDORS["glm"]) is VENDORS["glm"]
    with pytest.raises(UnknownVendor, match="known vendors: anthropic, azure, deepseek"):
        get_vendor("openia")
    assert [v.name for v in vendors("responses")] == ["azure", "openai", "qwen"]
    assert {p for v in vendors() for p in v.protocols} == set(PROTOCOLS)


def test_azure_needs_the_resource_endpoint() -> None:
    azure = get_vendor("azure")
    with pytest.raises(MissingVendorSetting, match="AZURE_OPENAI_ENDPOINT"):
        azure.base_url_for("responses", environ={})
    url = azure.base_url_for(
        "responses", environ={"AZURE_OPENAI_ENDPOINT": "https://mine.openai.azure.com/"}
    )
    assert url == "https://mine.openai.azure.com/openai/v1"


def test_the_sdk_base_url_variable_overrides_a_preset() -> None:
    openai_vendor = get_vendor("openai")
    environ = {"OPENAI_BASE_URL": "http://127.0.0.1:9/v1"}
    assert (
        openai_vendor.base_url_for("chat_completions", environ=environ)
        == environ["OPENAI_BASE_URL"]
    )
    # ... but never makes a protocol appear that the vendor does not offer.
    with pytest.raises(UnsupportedProtocol):
        openai_vendor.base_url_for("messages", environ=environ)


def test_api_keys_come_from_the_environment_and_never_show() -> None:
    kimi = get_vendor("kimi")
    key = kimi.api_key(environ={"KIMI_API_KEY": "sk-kimi-secret"})
    assert isinstance(key, Secret) and key == "sk-kimi-secret"
    assert "sk-kimi-secret" not in repr(key) and repr(key) == "<secret from KIMI_API_KEY>"
    assert f"Bearer {key}" == "Bearer sk-kimi-secret"  # SDKs use it as the str it is
    assert "secret" not in repr(kimi).replace("<secret", "")
    assert pickle.loads(pickle.dumps(key)) == "sk-kimi-secret"
    assert kimi.api_key(environ={}) is None
    with pytest.raises(MissingCredentials) as raised:
        kimi.require_api_key(environ={"OTHER": "x"})
    assert "MOONSHOT_API_KEY or KIMI_API_KEY" in str(raised.value)


def test_a_custom_vendor_is_just_data() -> None:
    local = Vendor("local", "Local vLLM", {"chat_completions": "http://127.0.0.1:8000/v1"}, ())
    assert local.protocols == ("chat_completions",)
    assert get_vendor(local) is local


# -- make_client -------------------------------------------------------------------------


def test_make_client_builds_the_client_of_each_openai_protocol() -> None:
    environ = {"DASHSCOPE_API_KEY": "k", "OPENAI_API_KEY": "k"}
    chat = make_client("qwen", "chat_completions", "qwen-plus", environ=environ)
    assert isinstance(chat, ChatCompletionsClient)
    assert chat.base_url == "https://dashscope.aliyuncs.com/compatible-mode/v1/"
    service = make_client("qwen", "responses", "qwen-plus", environ=environ)
    assert isinstance(service, ResponsesClient) and service.store is True
    local = make_client("openai", "responses", "gpt-5-mini", store=False, environ=environ)
    assert isinstance(local, ResponsesClient) and local.store is False
    assert isinstance(
        make_client("openai", "conversations", "gpt-5-mini", environ=environ), ConversationsClient
    )


def test_make_client_errors_are_typed_and_name_what_to_do() -> None:
    with pytest.raises(UnsupportedProtocol, match="it offers chat_completions"):
        make_client("kimi", "responses", "kimi-k2", environ={"MOONSHOT_API_KEY": "k"})
    with pytest.raises(MissingCredentials, match="DEEPSEEK_API_KEY"):
        make_client("deepseek", "chat_completions", "deepseek-chat", environ={})
    with pytest.raises(UnknownVendor):
        make_client("nobody", "chat_completions", "m", environ={})


def test_make_client_talks_to_the_given_base_url() -> None:
    with FakeModelServer() as server:
        client = make_client(
            "deepseek",
            "chat_completions",
            "deepseek-chat",
            base_url=server.url + "/v1",
            environ={"DEEPSEEK_API_KEY": "sk-test"},
            max_retries=0,
        )
        response = asyncio.run(client.get_response([Message.user("hello")]))
        assert response.text == "[seen 1] first: 'hello' | latest: 'hello'"
        assert server.requests_for("chat.completions")[0].body["model"] == "deepseek-chat"


def test_make_client_delegates_messages_to_chatkeep_anthropic() -> None:
    anthropic_client = pytest.importorskip("chatkeep.anthropic")
    with FakeModelServer() as server:
        client = make_client(
            "deepseek",
            "messages",
            "deepseek-chat",
            base_url=server.url + "/anthropic",
            environ={"DEEPSEEK_API_KEY": "sk-test"},
        )
        assert isinstance(client, anthropic_client.AnthropicChatClient)
        response = asyncio.run(client.get_response([Message.user("hello")]))
        assert response.text == "[seen 1] first: 'hello' | latest: 'hello'"
        (request,) = server.requests_for("messages")
        assert request.path == "/anthropic/v1/messages"
        assert request.body["model"] == "deepseek-chat" and request.body["max_tokens"] > 0
    default = make_client("anthropic", "messages", "claude", environ={"ANTHROPIC_API_KEY": "k"})
    assert "api.anthropic.com" in repr(default) and "k'" not in repr(default)
