"""Secrets never survive redact_url, whatever the backend calls them."""

from __future__ import annotations

import pytest

from chatkeep.core import Store, redact_url
from chatkeep.core.memory import MemoryStore
from chatkeep.core.urls import url_secrets

SECRET = "s3cr3tValue"


@pytest.mark.parametrize(
    "url",
    [
        f"azblob://c/p?connection_string=DefaultEndpointsProtocol%3Dhttp%3BAccountKey%3D{SECRET}",
        f"azblob://c/p?conn=AccountKey%3D{SECRET}%3BAccountName%3Ddev",
        f"azblob://c/p?account_url=https%3A%2F%2Fa.blob%2F%3Fsv%3D1%26sig%3D{SECRET}",
        f"azblob://c/p?sas=SharedAccessSignature%3Dsv%3D1%26sig%3D{SECRET}",
        f"redis://user:{SECRET}@host:6379/0",
        f"redis://user:ab/{SECRET}@host:6379/0",
        f"postgresql://u:{SECRET}@h/db?sslmode=require",
        f"s3://bucket/prefix?aws_secret_access_key={SECRET}",
    ],
)
def test_secret_is_hidden(url: str) -> None:
    shown = redact_url(url)
    assert SECRET not in shown
    assert "***" in shown
    assert repr(Store(MemoryStore(), url=url)).count(SECRET) == 0
    # What the conformance suite scrubs from its output: the secret on its own too.
    assert SECRET in url_secrets(url) or any(SECRET in s for s in url_secrets(url))
    assert not any(s in shown for s in url_secrets(url))


@pytest.mark.parametrize(
    "url",
    [
        "sqlite:///x.db?mode=ro",
        "s3://bucket/prefix?endpoint_url=http://127.0.0.1:5000&region=us-east-1",
        "azblob://container/prefix?api_version=2021-12-02",
        "memory://",
    ],
)
def test_plain_urls_are_unchanged(url: str) -> None:
    assert redact_url(url) == url
    assert url_secrets(url) == ()


def test_url_secrets_lists_each_secret_as_written_and_decoded() -> None:
    assert url_secrets("redis://:p%40ss@h/0?token=t0k&db=1") == ("p%40ss", "p@ss", "t0k")
    conn = "azblob://c/p?conn=AccountKey%3Dk3y%3BAccountName%3Ddev"
    assert "k3y" in url_secrets(conn)
    assert url_secrets("s3://b/p?endpoint_url=http%3A%2F%2Fapp%3Ahunter2%40h") == ("hunter2",)


def test_redact_url_hides_secrets_of_urls_nested_in_the_query() -> None:
    nested = redact_url("s3://b/p?endpoint_url=http://app:hunter2@h:9&region=x")
    assert nested == "s3://b/p?endpoint_url=http://app:***@h:9&region=x"
    encoded = redact_url("s3://b/p?endpoint_url=http%3A%2F%2Fapp%3Ahunter2%40h%3A9")
    assert "hunter2" not in encoded and encoded.startswith("s3://b/p?endpoint_url=http%3A")
    assert redact_url("s3://b/p?endpoint_url=http://h:9") == "s3://b/p?endpoint_url=http://h:9"
    deeper = redact_url("w+x://h?inner=" + "y://u:pw@h2?token=t0p")
    assert "pw" not in deeper and "t0p" not in deeper
