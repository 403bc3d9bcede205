"""The scheme table and the store-URL suggestions, against a list of common typos."""

from __future__ import annotations

import pytest

from chatkeep.core.schemes import IN_REPO_BACKENDS, extra_for, install_hint, suggest_url

#: Mistakes people make typing store URLs, and what each probably meant.
COMMON_TYPOS = [
    ("chats.db", "sqlite:///chats.db"),
    ("./chats.db", "sqlite:///./chats.db"),
    ("/var/lib/chats.db", "sqlite:////var/lib/chats.db"),
    ("C:/data/chats.db", "sqlite:///C:/data/chats.db"),
    ("sqlite:/good.db", "sqlite:///good.db"),
    ("sqlite:good.db", "sqlite:///good.db"),
    ("sqlite://good.db", "sqlite:///good.db"),
    ("SQLite://good.db", "sqlite:///good.db"),
    ("sqllite:///chats.db", "sqlite:///chats.db"),
    ("sqlit:///chats.db", "sqlite:///chats.db"),
    ("sqlite3:///chats.db", "sqlite:///chats.db"),
    ("redis:/oops", "redis://oops"),
    ("redis:localhost:6379", "redis://localhost:6379"),
    ("reddis://localhost", "redis://localhost"),
    ("redis+clustr://h:7000", "redis+cluster://h:7000"),
    ("postgress://localhost/db", "postgres://localhost/db"),
    ("postgresql:/localhost/db", "postgresql://localhost/db"),
    ("postgre://localhost/db", "postgres://localhost/db"),
    ("memroy://", "memory://"),
    ("azureblob://container/p", "azblob://container/p"),
    ("encrypted+sqlite://x.db", "encrypted+sqlite:///x.db"),
    ("encrypted+sqlite:/x.db", "encrypted+sqlite:///x.db"),
    # Suggestions never show a password.
    ("redis:/u:hunter2@h", "redis://u:***@h"),
    ("postgress://ada:hunter2@db/x", "postgres://ada:***@db/x"),
]

#: URLs that are right as typed: no suggestion.
CORRECT = [
    "sqlite:///chats.db",
    "sqlite:////abs/chats.db",
    "sqlite://:memory:",
    "memory://",
    "memory://name",
    "redis://localhost:6379/0",
    "rediss+cluster://h:7000",
    "postgresql://user:pw@host/db",
    "s3://bucket/prefix",
    "azblob://container",
    "encrypted+sqlite:///x.db",
    "encrypted+redis://h",
]


@pytest.mark.parametrize(("typed", "meant"), COMMON_TYPOS)
def test_common_typos_get_the_url_they_meant(typed: str, meant: str) -> None:
    assert suggest_url(typed) == meant


@pytest.mark.parametrize("url", CORRECT)
def test_correct_urls_get_no_suggestion(url: str) -> None:
    assert suggest_url(url) is None


def test_unknown_schemes_far_from_any_get_no_suggestion() -> None:
    assert suggest_url("memcached://h") is None
    assert suggest_url("") is None


def test_installed_third_party_schemes_count_as_known() -> None:
    assert suggest_url("mystore://x", ["mystore"]) is None
    assert suggest_url("mystor://x", ["mystore"]) == "mystore://x"


@pytest.mark.parametrize(
    ("key", "extra"),
    [
        ("postgresql", "postgres"),
        ("postgres", "postgres"),
        ("rediss", "redis"),
        ("redis+cluster", "redis"),
        ("azblob", "azure-blob"),
        ("azure_blob", "azure-blob"),
        ("encrypted+sqlite", "encrypted"),
        ("sqlite", "sqlite"),
        ("memcached", None),
        ("redis+clustr", None),
        ("memory", None),
    ],
)
def test_extra_for_names_the_extra_that_installs_the_backend(key: str, extra: str | None) -> None:
    assert extra_for(key) == extra
    assert install_hint(key) == (None if extra is None else f"pip install 'chatkeep[{extra}]'")


def test_the_table_has_one_row_per_backend_and_each_scheme_once() -> None:
    names = [row.name for row in IN_REPO_BACKENDS]
    schemes = [scheme for row in IN_REPO_BACKENDS for scheme in row.schemes]
    assert len(names) == len(set(names)) and len(schemes) == len(set(schemes))
