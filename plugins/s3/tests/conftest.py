"""Fixtures: a real S3 endpoint over HTTP for every test.

Order of preference (DESIGN section 7): the URL in ``CHATKEEP_TEST_S3_URL`` (for example
``s3://bucket/prefix?endpoint_url=http://localhost:9000&region=us-east-1``, with
credentials from the usual AWS environment), else a throwaway moto server started here on a
free port. There is no "standard port" probe: moto's default port 5000 is used by other
software too often to trust whatever answers there.

moto checks ``If-None-Match`` and then stores, without a lock, so two requests racing for
one key can both win; real S3 makes the check and the write one atomic step. By default the
moto server here handles one request at a time so its conditional writes behave like S3's;
``CHATKEEP_TEST_S3_SERIAL=0`` turns that off to watch moto's own behaviour.
"""

from __future__ import annotations

import logging
import os
import threading
import uuid
import warnings
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import pytest

from chatkeep.testing.services import service_unavailable

_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "chatkeep-test-key",
    "AWS_SECRET_ACCESS_KEY": "chatkeep-test-secret",
    "AWS_DEFAULT_REGION": "us-east-1",
}


class _OneAtATime:
    """WSGI middleware running one request at a time (S3's conditional writes are atomic;
    moto's only are when requests do not overlap)."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.lock = threading.Lock()

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        with self.lock:
            result = self.app(environ, start_response)
            try:
                body = b"".join(result)
            finally:
                close = getattr(result, "close", None)
                if close is not None:
                    close()
        return [body]


@dataclass(frozen=True)
class S3Endpoint:
    """Where the tests' bucket is: ``base_url`` is an ``s3://`` URL without options."""

    bucket: str
    prefix: str
    query: dict[str, str]
    moto: bool

    def url(self, prefix: str | None = None, **options: object) -> str:
        """An ``s3://`` URL for a fresh (or the given) prefix, with extra options."""
        sub = prefix if prefix is not None else f"t-{uuid.uuid4().hex[:12]}"
        path = "/".join(p for p in (self.prefix, sub) if p)
        query = {**self.query, **{k: str(v) for k, v in options.items()}}
        return urlunsplit(("s3", self.bucket, "/" + path, urlencode(query), ""))

    def client(self) -> Any:
        """A plain boto3 client for the endpoint (to look under the store's feet)."""
        import boto3  # type: ignore[import-untyped]

        return boto3.client(
            "s3",
            endpoint_url=self.query.get("endpoint_url"),
            region_name=self.query.get("region", "us-east-1"),
        )


def _isolate_from_broken_plugins() -> str | None:
    """If another chatkeep plugin fails to import (a sibling still being written), load
    only ours, as ``CHATKEEP_PLUGINS`` allows; returns the previous value to restore."""
    from chatkeep.core import PluginError, backends
    from chatkeep.core.plugins import reset_plugins

    try:
        backends()
        return None
    except PluginError as exc:
        warnings.warn(f"loading only the s3 chatkeep plugin: {exc}", stacklevel=1)
        previous = os.environ.get("CHATKEEP_PLUGINS", "")
        os.environ["CHATKEEP_PLUGINS"] = "s3"
        reset_plugins()
        return previous


def _start_moto() -> tuple[Any, str]:
    try:
        from moto.server import ThreadedMotoServer
    except ImportError as exc:  # pragma: no cover - moto is in the dev group
        service_unavailable(
            f"moto[server] is not installed ({exc}); set CHATKEEP_TEST_S3_URL instead"
        )
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # one line per request otherwise
    if os.environ.get("CHATKEEP_TEST_S3_SERIAL", "1") != "0":
        wsgi = server._server  # the werkzeug server moto made; wrap its app
        assert wsgi is not None
        wsgi.app = _OneAtATime(wsgi.app)
    host, port = server.get_host_and_port()
    return server, f"http://{host}:{port}"


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[S3Endpoint]:
    """The S3 endpoint of this test run, with its bucket created."""
    configured = os.environ.get("CHATKEEP_TEST_S3_URL")
    saved = {name: os.environ.get(name) for name in [*_CREDENTIALS, "CHATKEEP_PLUGINS"]}
    _isolate_from_broken_plugins()
    server = None
    if configured:
        parts = urlsplit(configured)
        endpoint = S3Endpoint(
            bucket=parts.netloc,
            prefix=parts.path.strip("/"),
            query=dict(parse_qsl(parts.query)),
            moto=False,
        )
    else:
        server, address = _start_moto()
        # Children spawned by the cross-process tests inherit these.
        os.environ.update(_CREDENTIALS)
        endpoint = S3Endpoint(
            bucket=f"chatkeep-{uuid.uuid4().hex[:8]}",
            prefix="",
            query={"endpoint_url": address, "region": "us-east-1"},
            moto=True,
        )
    client = endpoint.client()
    try:
        client.create_bucket(Bucket=endpoint.bucket)
    except client.exceptions.BucketAlreadyOwnedByYou:
        pass
    except client.exceptions.BucketAlreadyExists:
        pass
    try:
        yield endpoint
    finally:
        if server is not None:
            server.stop()
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@pytest.fixture
def s3_url(s3_endpoint: S3Endpoint) -> str:
    """An ``s3://`` URL with a prefix of its own (so each test starts empty)."""
    return s3_endpoint.url()


@pytest.fixture
def open_s3(s3_endpoint: S3Endpoint) -> Iterator[Callable[..., Any]]:
    """``open_s3(url=None, **options)`` -> an ``S3Store`` (closed after the test)."""
    from chatkeep.s3.store import S3Store

    opened: list[S3Store] = []

    def opener(url: str | None = None, **options: Any) -> S3Store:
        store = S3Store.from_url(url or s3_endpoint.url(), **options)
        opened.append(store)
        return store

    yield opener
    for store in opened:
        store.close()


# -- request counting and fault injection ---------------------------------------------------


@pytest.fixture
def count_requests() -> Callable[[Any], Counter[str]]:
    """``count_requests(store)`` -> a Counter of S3 operations the store makes from now on
    (counted through botocore's ``before-call`` event; retries are not double counted)."""

    def attach(store: Any) -> Counter[str]:
        counter: Counter[str] = Counter()

        def count(model: Any, params: dict[str, Any], **_: Any) -> None:
            counter[model.name] += 1
            if "Range" in params.get("headers", {}) or "Range" in params:
                counter["ranged"] += 1

        client = getattr(store.bucket.client, "real", store.bucket.client)
        client.meta.events.register("before-call.s3", count)
        return counter

    return attach


class Faults:
    """A stand-in for a store's boto3 client that runs scheduled faults.

    ``faults.plan("put_object", action, when=...)`` queues ``action`` for the next call of
    that operation whose keyword arguments satisfy ``when``; calls without a queued action
    go straight to the real client.
    """

    def __init__(self, real: Any) -> None:
        self.real = real
        self.plans: dict[str, list[tuple[Callable[[dict[str, Any]], bool], Callable[..., Any]]]]
        self.plans = {}
        self.calls: Counter[str] = Counter()
        self.lock = threading.Lock()
        #: Called for calls with nothing planned: returns an action, or None to pass.
        self.default: Callable[[str, dict[str, Any]], Callable[..., Any] | None] | None = None

    def plan(
        self,
        operation: str,
        *actions: Callable[..., Any],
        when: Callable[[dict[str, Any]], bool] = lambda kwargs: True,
    ) -> None:
        with self.lock:
            self.plans.setdefault(operation, []).extend((when, action) for action in actions)

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self.real, name)
        if name.startswith("_") or name == "meta" or not callable(attribute):
            return attribute

        def call(**kwargs: Any) -> Any:
            action = None
            with self.lock:
                self.calls[name] += 1
                queue = self.plans.get(name, [])
                for index, (when, candidate) in enumerate(queue):
                    if when(kwargs):
                        action = candidate
                        del queue[index]
                        break
                if action is None and self.default is not None:
                    action = self.default(name, kwargs)
            if action is None:
                return attribute(**kwargs)
            return action(attribute, kwargs)

        return call

    # -- actions (each gets the real method and the call's keyword arguments) -------------

    @staticmethod
    def lost_answer(method: Any, kwargs: dict[str, Any]) -> Any:
        """The request takes effect, but its answer never arrives."""
        from botocore.exceptions import ReadTimeoutError  # type: ignore[import-untyped]

        method(**kwargs)
        raise ReadTimeoutError(endpoint_url="http://injected")

    @staticmethod
    def dropped(method: Any, kwargs: dict[str, Any]) -> Any:
        """The connection drops before the request reaches the server."""
        from botocore.exceptions import EndpointConnectionError

        raise EndpointConnectionError(endpoint_url="http://injected")

    @staticmethod
    def refused(status: int, code: str) -> Callable[..., Any]:
        """The server answers ``status``/``code`` without doing anything."""

        def action(method: Any, kwargs: dict[str, Any]) -> Any:
            raise _client_error(status, code)

        return action

    @staticmethod
    def done_then(status: int, code: str) -> Callable[..., Any]:
        """The request takes effect, then the server answers ``status``/``code``."""

        def action(method: Any, kwargs: dict[str, Any]) -> Any:
            method(**kwargs)
            raise _client_error(status, code)

        return action

    @staticmethod
    def first(hook: Callable[[], object]) -> Callable[..., Any]:
        """Run ``hook`` (say, another writer's append), then the request."""

        def action(method: Any, kwargs: dict[str, Any]) -> Any:
            hook()
            return method(**kwargs)

        return action

    @staticmethod
    def crash(method: Any, kwargs: dict[str, Any]) -> Any:
        """The process dies before sending the request."""
        raise _InjectedCrash("injected crash")


class _InjectedCrash(BaseException):
    """Not an Exception: nothing in the store may swallow a crash."""


def _client_error(status: int, code: str) -> Exception:
    from botocore.exceptions import ClientError

    error: Exception = ClientError(
        {
            "Error": {"Code": code, "Message": "injected"},
            "ResponseMetadata": {"HTTPStatusCode": status},
        },
        "Injected",
    )
    return error


@pytest.fixture
def faulty() -> Callable[[Any], Faults]:
    """``faulty(store)`` swaps the store's client for a :class:`Faults` and returns it."""

    def wrap(store: Any) -> Faults:
        faults = Faults(store.bucket.client)
        store.bucket.client = faults
        return faults

    return wrap


@pytest.fixture
def crash_type() -> type[BaseException]:
    """The exception :meth:`Faults.crash` raises."""
    return _InjectedCrash
