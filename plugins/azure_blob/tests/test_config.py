"""URLs, options and authentication: parsed right, and never leaking a secret."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import pytest

from chatkeep.azure_blob import AzureBlobConfigError
from chatkeep.azure_blob.config import parse_settings
from chatkeep.azure_blob.store import AzureBlobStore
from chatkeep.core import InvalidOption, backends, open_store

KEY = "c2VjcmV0LWtleS10aGF0LW11c3QtbmV2ZXItbGVhaw=="  # base64, like a real account key
CONNECTION = (
    f"DefaultEndpointsProtocol=https;AccountName=acct;AccountKey={KEY};"
    "EndpointSuffix=core.windows.net"
)
SAS = "sv=2021-12-02&ss=b&srt=co&sp=racwdl&se=2030-01-01&sig=c2lnbmF0dXJlLXNlY3JldA%3D%3D"


def settings(url: str, **options: Any) -> Any:
    return parse_settings(url, options)


def test_container_and_prefix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AZURE_STORAGE_CONNECTION_STRING", CONNECTION)
    assert settings("azblob://chats").root == ""
    parsed = settings("azblob://chats/prod/eu/")
    assert (parsed.container, parsed.root) == ("chats", "prod/eu/")
    assert settings("azblob://chats/a%20b").root == "a b/"


@pytest.mark.parametrize(
    "url",
    [
        "azblob://Chats/x",  # upper case
        "azblob://ab/x",  # too short
        "azblob://a--b/x",  # double hyphen
        "azblob:///x",  # no container
        "azblob://chats/a/../b",  # traversal in the prefix
        "azblob://chats/a//b",  # empty segment
        "azblob://chats/a/./b",
        "azblob://chats/a\\b",
        "azblob://chats/" + "p" * 300,  # prefix too long for Azure's name limit
        "s3://chats/x",
    ],
)
def test_bad_locations_are_rejected(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AZURE_STORAGE_CONNECTION_STRING", CONNECTION)
    with pytest.raises(AzureBlobConfigError):
        settings(url)


def test_connection_string_from_url_or_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AZURE_STORAGE_CONNECTION_STRING", raising=False)
    with pytest.raises(AzureBlobConfigError, match="AZURE_STORAGE_CONNECTION_STRING"):
        settings("azblob://chats")
    parsed = settings("azblob://chats?connection_string=" + quote(CONNECTION, safe=""))
    assert parsed.connection_string == CONNECTION
    assert parsed.endpoint == "https://acct.blob.core.windows.net"
    assert parsed.auth == "connection string (account key)"
    monkeypatch.setenv("AZURE_STORAGE_CONNECTION_STRING", CONNECTION)
    assert settings("azblob://chats").connection_string == CONNECTION


def test_account_key_and_sas_token() -> None:
    parsed = settings(
        "azblob://chats",
        account_url="https://acct.blob.core.windows.net",
        account_key=KEY,
    )
    assert parsed.auth == "account key"
    assert parsed.credential.named_key == ("acct", KEY)
    emulator = settings(
        "azblob://chats", account_url="http://127.0.0.1:10000/devstoreaccount1", account_key=KEY
    )
    assert emulator.credential.named_key[0] == "devstoreaccount1"
    assert emulator.endpoint == "http://127.0.0.1:10000/devstoreaccount1"
    sas = settings(
        "azblob://chats", account_url="https://acct.blob.core.windows.net", sas_token=SAS
    )
    assert sas.auth == "SAS token" and sas.credential.signature == SAS


def test_default_credential_and_credential_objects() -> None:
    pytest.importorskip("azure.identity")
    parsed = settings(
        "azblob://chats?account_url=https://acct.blob.core.windows.net&credential=default"
    )
    assert parsed.auth == "DefaultAzureCredential" and parsed.owns_credentials
    assert type(parsed.credential).__name__ == "DefaultAzureCredential"
    assert type(parsed.async_credential).__module__.startswith("azure.identity.aio")
    parsed.credential.close()

    class SyncCredential:
        def get_token(self, *scopes: str, **kwargs: Any) -> Any:
            raise NotImplementedError

    class AsyncCredential:
        async def get_token(self, *scopes: str, **kwargs: Any) -> Any:
            raise NotImplementedError

    url = "https://acct.blob.core.windows.net"
    sync = settings("azblob://chats", account_url=url, credential=SyncCredential())
    assert sync.sync_available and not sync.async_available  # async calls use threads
    both = settings(
        "azblob://chats",
        account_url=url,
        credential=SyncCredential(),
        async_credential=AsyncCredential(),
    )
    assert both.sync_available and both.async_available
    only_async = settings("azblob://chats", account_url=url, credential=AsyncCredential())
    assert only_async.async_available and not only_async.sync_available
    store = AzureBlobStore("chats", account_url=url, credential=AsyncCredential())
    with pytest.raises(AzureBlobConfigError, match="async credential"):
        store.read("s")


@pytest.mark.parametrize(
    "options",
    [
        {"connection_string": CONNECTION, "account_key": KEY},
        {"account_url": "https://acct.blob.core.windows.net", "account_key": KEY, "sas_token": SAS},
        {"account_url": "https://acct.blob.core.windows.net", "credential": "my-secret-token"},
        {"account_url": "ftp://acct", "account_key": KEY},
        {"connection_string": "not a connection string"},
    ],
)
def test_conflicting_or_invalid_auth_is_rejected_without_echoing_secrets(
    options: dict[str, str],
) -> None:
    with pytest.raises(AzureBlobConfigError) as raised:
        settings("azblob://chats", **options)
    for secret in (KEY, SAS, "my-secret-token", "signature-secret"):
        assert secret not in str(raised.value)


def test_typed_options_from_the_query_string(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AZURE_STORAGE_CONNECTION_STRING", CONNECTION)
    parsed = settings(
        "azblob://chats?api_version=2021-12-02&create_container=false&retries=1"
        "&timeout=5.5&segment_blocks=100&max_block_bytes=9999999&contention_timeout=3"
    )
    assert parsed.api_version == "2021-12-02"
    assert parsed.create_container is False
    assert (parsed.retries, parsed.timeout) == (1, 5.5)
    assert parsed.limits.segment_blocks == 100
    assert parsed.limits.max_block == 4 * 1024 * 1024  # never above the conservative limit
    assert parsed.limits.contention_timeout == 3
    assert settings("azblob://chats?retries=1", retries=7).retries == 7  # keywords win
    with pytest.raises(AzureBlobConfigError, match="'colour'"):
        settings("azblob://chats?colour=blue")
    with pytest.raises(AzureBlobConfigError, match="'retries'"):
        settings("azblob://chats?retries=many")
    with pytest.raises(AzureBlobConfigError, match="segment_blocks"):
        settings("azblob://chats?segment_blocks=60000")


def test_reprs_and_errors_never_show_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    url = "azblob://chats/p?connection_string=" + quote(CONNECTION, safe="")
    store = AzureBlobStore.from_url(url)
    shown = repr(store) + store.url + repr(store._settings)
    assert KEY not in shown and "AccountKey" not in shown
    assert "chats" in shown and "acct.blob.core.windows.net" in shown
    keyed = AzureBlobStore(
        "chats", account_url="https://acct.blob.core.windows.net/?" + SAS, credential=None
    )
    assert "sig=" not in repr(keyed) and "signature" not in repr(keyed)
    assert "SAS in account_url" in repr(keyed)


def test_registered_with_the_core() -> None:
    info = backends()["azure-blob"]
    assert info.distribution == "chatkeep-azure-blob"
    assert "azblob" in info.schemes
    assert info.capabilities == AzureBlobStore.capabilities
    assert {"delete", "list_sessions", "close", "shared", "durable"} <= info.capabilities


def test_open_store_builds_the_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AZURE_STORAGE_CONNECTION_STRING", CONNECTION)
    store = open_store("azblob://chats/prefix")
    assert isinstance(store.backend, AzureBlobStore)
    assert store.backend.url == "azblob://chats/prefix"
    by_name = open_store("azure-blob", url="azblob://chats/other")
    assert by_name.backend.url == "azblob://chats/other"  # type: ignore[attr-defined]


def test_every_option_is_documented() -> None:
    from pathlib import Path

    from chatkeep.azure_blob.config import KNOWN_OPTIONS

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    missing = sorted(option for option in KNOWN_OPTIONS if f"`{option}`" not in readme)
    assert not missing, f"options missing from the README's table: {missing}"


def test_namespace_option_and_prefix_rules(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AZURE_STORAGE_CONNECTION_STRING", "UseDevelopmentStorage=true")
    assert settings("azblob://chats/p").base == "p/chatkeep-v2/_/"
    assert settings("azblob://chats/p?namespace=acme/eu").base == "p/chatkeep-v2/nacme~2feu/"
    assert settings("azblob://chats?namespace=a.b:c").base == "chatkeep-v2/na~2eb~3ac/"
    by_keyword = settings("azblob://chats/p?namespace=url", namespace="kw")
    assert by_keyword.namespace == "kw"
    long_namespace = "x." * 60
    assert settings("azblob://chats", namespace=long_namespace).base.startswith("chatkeep-v2/h")
    assert settings("azblob://chats/a%2Fb").root == "a/b/"  # the URL is decoded once
    assert settings("azblob://chats/url", prefix="a%2Fb").root == "a%2Fb/"  # literal
    assert settings("azblob://chats/url", prefix="/").root == ""  # the keyword wins
    for bad in ("acme/", "a b", "a%2Fb", "", "../x"):
        with pytest.raises(InvalidOption):
            settings("azblob://chats", namespace=bad)
    for marker in ("chatkeep-v2", "a/chatkeep-v2/b"):
        with pytest.raises(InvalidOption):
            settings(f"azblob://chats/{marker}")
