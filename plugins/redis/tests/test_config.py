"""Unit tests of URL and option parsing, and of the retry policy (no server needed)."""

from __future__ import annotations

import logging
from datetime import timedelta

import pytest
import redis.exceptions

from chatkeep.core import StoreUnavailable
from chatkeep.redis import InvalidOption, RedisStore
from chatkeep.redis.config import parse_settings
from chatkeep.redis.faults import Faults
from chatkeep.redis.retrying import RetryPolicy


def test_defaults() -> None:
    settings = parse_settings("redis://127.0.0.1:6379/0")
    assert settings.cluster is False
    assert settings.key_prefix == "chatkeep:"
    assert settings.namespace is None
    assert settings.ttl_ms is None
    assert (settings.pool_size, settings.retries, settings.scan_count) == (50, 3, 1000)
    assert settings.driver_url == "redis://127.0.0.1:6379/0"


def test_chatkeep_options_come_out_of_the_query_and_the_rest_go_to_redis_py() -> None:
    settings = parse_settings(
        "rediss://u:p%40ss@h:7000/2?key_prefix=app%3A&namespace=acme%2Feu&ttl=1.5"
        "&pool_size=7&retries=0&client_name=chat&ssl_cert_reqs=none"
    )
    assert settings.key_prefix == "app:"
    assert settings.namespace == "acme/eu"  # the query is decoded once (URL syntax)
    assert settings.ttl_ms == 1500
    assert settings.pool_size == 7
    assert settings.retries == 0
    assert settings.driver_url == "rediss://u:p%40ss@h:7000/2?client_name=chat&ssl_cert_reqs=none"
    assert set(settings.secrets) == {"p%40ss", "p@ss"}
    assert "p%40ss" not in settings.redacted_url and "p@ss" not in repr(settings)


def test_keywords_win_over_the_query() -> None:
    settings = parse_settings(
        "redis://h?namespace=a&key_prefix=x:&ttl=5",
        namespace="b",
        key_prefix="y:",
        ttl=timedelta(minutes=1),
    )
    assert (settings.namespace, settings.key_prefix) == ("b", "y:")
    assert settings.ttl_ms == 60_000


def test_keywords_are_taken_literally() -> None:
    with pytest.raises(InvalidOption, match="invalid namespace"):
        parse_settings("redis://h", namespace="acme%2Feu")  # no decoding of keywords


@pytest.mark.parametrize(
    "options",
    [
        {"colour": "blue"},
        {"decode_responses": True},  # would break binary records: chatkeep sets it
        {"max_connections": 3},  # chatkeep's pool_size is the one knob
    ],
)
def test_unknown_or_reserved_options_are_refused_when_opened(options: dict[str, object]) -> None:
    with pytest.raises(InvalidOption, match=next(iter(options))):
        RedisStore("redis://127.0.0.1:1/0", **options)  # type: ignore[arg-type]
    query = "&".join(f"{key}={value}" for key, value in options.items())
    with pytest.raises(InvalidOption, match=next(iter(options))):
        RedisStore(f"redis://127.0.0.1:1/0?{query}")


def test_redis_py_options_are_accepted() -> None:
    settings = parse_settings("redis://h?client_name=app&health_check_interval=30", username="u")
    assert settings.driver_options == {"username": "u"}
    parse_settings("redis+cluster://h", read_from_replicas=False)


@pytest.mark.parametrize(
    ("options", "secret"),
    [
        ({"password": "kw-secret"}, "kw-secret"),
        ({"ssl_password": "key-secret"}, "key-secret"),
    ],
)
def test_keyword_credentials_are_secrets(options: dict[str, str], secret: str) -> None:
    settings = parse_settings("rediss://h", **options)
    assert secret in settings.secrets
    store = RedisStore("rediss://h", **options)
    assert secret not in repr(store)
    store.close()


def test_query_password_is_a_secret() -> None:
    settings = parse_settings("redis://h?password=q-secret")
    assert "q-secret" in settings.secrets and "q-secret" not in settings.redacted_url


def test_cluster_urls_with_several_seeds() -> None:
    settings = parse_settings("rediss+cluster://:pw@10.0.0.1:7000,10.0.0.2:7001,[::1]:7002")
    assert settings.cluster is True
    assert settings.driver_url == "rediss://:pw@10.0.0.1:7000"
    assert settings.seeds == (("10.0.0.2", 7001), ("::1", 7002))


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("http://h", "not a Redis URL"),
        ("redis+cluster://h/3", "only database 0"),
        ("redis://a:1,b:2", r"needs redis\+cluster"),
        ("redis://h?ttl=soon", "not a number"),
        ("redis://h?ttl=0", "positive"),
        ("redis://h?pool_size=0", ">= 1"),
        ("redis://h?retries=-1", ">= 0"),
        ("redis://h?key_prefix=%7Bx", "hash tag"),
        ("redis://h?namespace=%7Bx", "invalid namespace"),
        ("redis://h?namespace=a//b", "invalid namespace"),
        ("redis+cluster://h:notaport", "invalid port"),
        ("redis://h/abc", "must be a number"),
        ("redis://h/-1", "must be a number"),
        ("redis://h/1/2", "must be a number"),
    ],
)
def test_bad_urls_are_rejected_clearly(url: str, message: str) -> None:
    with pytest.raises(InvalidOption, match=message) as caught:
        RedisStore(url)
    assert isinstance(caught.value, ValueError)


def test_bad_urls_never_echo_the_password() -> None:
    with pytest.raises(ValueError) as caught:
        RedisStore("redis+cluster://:hunter2@h/3")
    assert "hunter2" not in str(caught.value)


def test_bad_option_types() -> None:
    with pytest.raises(TypeError):
        RedisStore("redis://h", ttl="1")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        RedisStore("redis://h", pool_size=2.5)  # type: ignore[arg-type]


def test_repr_shows_no_password() -> None:
    store = RedisStore("redis://admin:hunter2@127.0.0.1:1/0", namespace="t")
    assert repr(store) == (
        "<RedisStore url='redis://admin:***@127.0.0.1:1/0' key_prefix='chatkeep:' namespace='t'>"
    )
    store.close()


# -- the retry policy ---------------------------------------------------------------------


def test_backoff_grows_exponentially_up_to_the_cap() -> None:
    policy = RetryPolicy(retries=10, backoff=0.1, backoff_max=1.0)
    for attempt, base in [(1, 0.1), (2, 0.2), (3, 0.4), (4, 0.8), (5, 1.0), (9, 1.0)]:
        delays = [policy.delay(attempt) for _ in range(50)]
        assert all(base * 0.5 <= d <= base for d in delays)


def test_policy_retries_then_succeeds() -> None:
    calls = []

    def flaky() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise redis.exceptions.ConnectionError("reset")
        return "ok"

    assert RetryPolicy(retries=2, backoff=0).run("read", flaky) == "ok"
    assert len(calls) == 3


def test_policy_gives_up_with_store_unavailable(caplog: pytest.LogCaptureFixture) -> None:
    policy = RetryPolicy(retries=2, backoff=0, faults=Faults("redis://h", ("hunter2",)))

    def dead() -> None:
        raise redis.exceptions.TimeoutError("timeout talking to hunter2")

    caplog.set_level(logging.WARNING, logger="chatkeep.redis")
    with pytest.raises(StoreUnavailable) as caught:
        policy.run("append", dead)
    message = str(caught.value)
    assert "append failed 3 time(s)" in message and "redis://h" in message
    assert "hunter2" not in message and "***" in message
    assert caught.value.__cause__ is None  # the cause's text holds the secret: not chained
    assert len(caplog.records) == 2 and "hunter2" not in caplog.text


def test_only_a_failed_append_gets_the_append_advice() -> None:
    policy = RetryPolicy(retries=0, backoff=0, faults=Faults("redis://h", ()))

    def dead() -> None:
        raise redis.exceptions.ConnectionError("refused")

    for operation, advice in (("append", "failed append"), ("list_sessions", "is running")):
        with pytest.raises(StoreUnavailable) as caught:
            policy.run(operation, dead)
        assert advice in str(caught.value), operation
    assert "append" not in str(caught.value)


def test_policy_keeps_the_cause_when_it_is_safe() -> None:
    def dead() -> None:
        raise redis.exceptions.ConnectionError("refused")

    with pytest.raises(StoreUnavailable) as caught:
        RetryPolicy(retries=0).run("read", dead)
    assert isinstance(caught.value.__cause__, redis.exceptions.ConnectionError)


def test_policy_does_not_retry_authentication_failures() -> None:
    calls = []

    def denied() -> None:
        calls.append(1)
        raise redis.exceptions.AuthenticationError("invalid username-password pair")

    with pytest.raises(StoreUnavailable, match="credentials"):
        RetryPolicy(retries=5, backoff=0).run("read", denied)
    assert len(calls) == 1


def test_policy_does_not_retry_command_errors() -> None:
    calls = []

    def refused() -> None:
        calls.append(1)
        raise redis.exceptions.ResponseError("OOM command not allowed")

    with pytest.raises(StoreUnavailable, match="refused"):
        RetryPolicy(retries=5, backoff=0).run("append", refused)
    assert len(calls) == 1


def test_policy_lets_other_errors_through() -> None:
    def buggy() -> None:
        raise KeyError("not a redis error")

    with pytest.raises(KeyError):
        RetryPolicy().run("read", buggy)
