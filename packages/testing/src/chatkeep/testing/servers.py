"""Real servers for tests that run something over every in-repo backend (framework
adapters, end-to-end checks): where each one is, in DESIGN section 7's order of preference.

Each function returns a chatkeep store URL of its own (a fresh schema, namespace, prefix or
container) and registers what must be removed afterwards with ``cleanup``; a missing
service calls :func:`~chatkeep.testing.services.service_unavailable` (skip, or fail under
``CI=true``)::

    with ExitStack() as cleanup:
        url = postgres_store_url(cleanup)        # postgresql://...?schema=ck_test_...
        url = redis_store_url(cleanup)           # redis://...?namespace=ck-test-...
        url = s3_store_url(cleanup)              # a bucket on this process's moto server
        url = azure_store_url(cleanup, workdir)  # Azurite on 10000, or this process's own

A conftest gets ready-made fixtures (``sqlite_url``, ``postgres_url``, ``redis_url``,
``s3_url``, ``azure_url``, ``store_url`` and ``store`` parametrized over :data:`BACKENDS`,
``sid``) with ``from chatkeep.testing.servers import *FIXTURE_NAMES``, and
:func:`fresh_store_url` for a store of a test's own inside them.

Servers: ``CHATKEEP_TEST_POSTGRES_URL`` / ``CHATKEEP_TEST_REDIS_URL`` or the standard local
ports; S3 is a moto server on a free loopback port (``moto[server]``); Azure Blob is
Azurite on port 10000 if it answers as the development account, else one started from
``<repo>/.cache/azurite`` (installed there with npm on first use). A process starts at most
one moto server and one Azurite, on first use, and stops them when it exits; each URL gets
a bucket or container of its own on them (starting a server per test module cost seconds
each).
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import os
import secrets
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

import pytest

from chatkeep.core import Store, open_store, redact_url

from .services import service_unavailable

__all__ = [
    "AZURITE_ACCOUNT",
    "AZURITE_KEY",
    "BACKENDS",
    "azure_store_url",
    "fresh_store_url",
    "moto_credentials",
    "postgres_store_url",
    "redis_store_url",
    "s3_store_url",
    "with_query",
]

#: Azurite's published development account (documented by Microsoft; not a secret).
AZURITE_ACCOUNT = "devstoreaccount1"
AZURITE_KEY = (
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)
_POSTGRES = "postgresql://postgres@127.0.0.1:5432/test"
_REDIS = "redis://127.0.0.1:6379/0"


def with_query(url: str, **params: object) -> str:
    """``url`` with ``params`` added to (or replacing those in) its query string."""
    parts = urlsplit(url)
    query = dict(parse_qsl(parts.query, keep_blank_values=True))
    query.update({key: str(value) for key, value in params.items()})
    return urlunsplit(parts._replace(query=urlencode(query)))


def _token() -> str:
    return secrets.token_hex(5)


def postgres_store_url(cleanup: ExitStack) -> str:
    """A PostgreSQL store URL on a schema of its own, dropped by ``cleanup``."""
    import psycopg
    from psycopg import sql

    server = os.environ.get("CHATKEEP_TEST_POSTGRES_URL") or _POSTGRES
    try:
        with psycopg.connect(server, connect_timeout=3) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error as exc:
        service_unavailable(f"PostgreSQL is not reachable at {redact_url(server)}: {exc}")
    schema = f"ck_test_{_token()}"

    def drop() -> None:
        with psycopg.connect(server, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))

    cleanup.callback(drop)
    return with_query(server, schema=schema)


def redis_store_url(cleanup: ExitStack) -> str:
    """A Redis store URL with a namespace of its own, whose keys ``cleanup`` deletes."""
    import redis

    server = os.environ.get("CHATKEEP_TEST_REDIS_URL") or _REDIS
    try:
        client = redis.Redis.from_url(server, socket_connect_timeout=2, socket_timeout=5)
        client.ping()
    except redis.RedisError as exc:
        service_unavailable(f"Redis is not reachable at {redact_url(server)}: {exc}")
    namespace = f"ck-test-{_token()}"

    def erase() -> None:
        try:
            for key in client.scan_iter(match=f"*{namespace}*", count=1000):
                client.unlink(key)
        finally:
            client.close()

    cleanup.callback(erase)
    return with_query(server, namespace=namespace)


_MOTO_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "chatkeep-test-key",
    "AWS_SECRET_ACCESS_KEY": "chatkeep-test-secret",
    "AWS_DEFAULT_REGION": "us-east-1",
}


def moto_credentials() -> dict[str, str]:
    """The dummy credentials the throwaway moto server accepts (set them in the environment
    before spawning processes that open its URL)."""
    return dict(_MOTO_CREDENTIALS)


_SERVERS: dict[tuple[str, int], str] = {}
_SERVERS_LOCK = threading.Lock()


def _process_server(kind: str, start: Callable[[], str]) -> str:
    """The endpoint of this process's server of ``kind``, started by ``start`` on first use
    (which registers its own stop at exit). Keyed by process id: a forked child starts its
    own."""
    key = (kind, os.getpid())
    with _SERVERS_LOCK:
        if key not in _SERVERS:
            _SERVERS[key] = start()
        return _SERVERS[key]


def _start_moto() -> str:
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    atexit.register(server.stop)
    host, port = server.get_host_and_port()
    return f"http://{host}:{port}"


def s3_store_url(cleanup: ExitStack) -> str:
    """An ``s3://`` store URL on a moto server started here (stopped by ``cleanup``), or
    under a fresh prefix of ``CHATKEEP_TEST_S3_URL``."""
    configured = os.environ.get("CHATKEEP_TEST_S3_URL")
    if configured:
        parts = urlsplit(configured)
        return urlunsplit(parts._replace(path=f"{parts.path.rstrip('/')}/t-{_token()}"))
    try:
        import boto3  # type: ignore[import-untyped]
        from moto.server import ThreadedMotoServer  # noqa: F401 (checked here, used below)
    except ImportError as exc:
        service_unavailable(f"moto[server] is needed for the S3 tests ({exc})")
    endpoint = _process_server("moto", _start_moto)
    saved = {name: os.environ.get(name) for name in _MOTO_CREDENTIALS}
    os.environ.update(_MOTO_CREDENTIALS)

    def restore() -> None:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value

    cleanup.callback(restore)
    bucket = f"chatkeep-{_token()}"
    boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1").create_bucket(Bucket=bucket)
    return f"s3://{bucket}/t?{urlencode({'endpoint_url': endpoint, 'region': 'us-east-1'})}"


def _listening(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.5):
        return True
    return False


def _connection_string(endpoint: str) -> str:
    return (
        f"DefaultEndpointsProtocol=http;AccountName={AZURITE_ACCOUNT};AccountKey={AZURITE_KEY};"
        f"BlobEndpoint={endpoint};"
    )


def _dev_account_answers(endpoint: str) -> bool:
    from azure.storage.blob import BlobServiceClient

    client = BlobServiceClient.from_connection_string(
        _connection_string(endpoint), retry_total=0, connection_timeout=2, read_timeout=5
    )
    try:
        client.get_service_properties()
    except Exception:
        return False
    finally:
        client.close()
    return True


def _azurite_binary(repo: Path) -> Path:
    directory = Path(os.environ.get("CHATKEEP_AZURITE_DIR") or repo / ".cache" / "azurite")
    binary = directory / "node_modules" / ".bin" / "azurite-blob"
    found = shutil.which("azurite-blob")
    if found and not binary.exists():
        return Path(found)
    npm = shutil.which("npm")
    directory.parent.mkdir(parents=True, exist_ok=True)
    # Several test processes (pytest-xdist workers, nox sessions) may get here at once: one
    # installs, the others wait; two npm installs into one folder leave it broken.
    with open(directory.parent / "azurite.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if binary.exists():
            return binary
        if npm is None:
            raise RuntimeError("Node.js and npm are needed to install Azurite (not on PATH)")
        directory.mkdir(parents=True, exist_ok=True)
        command = [npm, "install", "--prefix", str(directory), "azurite@3"]
        command += ["--no-audit", "--no-fund"]
        result = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
        if result.returncode != 0 or not binary.exists():
            raise RuntimeError(f"npm install azurite@3 failed: {result.stderr[-800:]}")
    return binary


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _start_azurite(repo: Path) -> str:
    """Start this process's Azurite (data in a temporary folder; both go at exit)."""
    binary = _azurite_binary(repo)
    workdir = Path(tempfile.mkdtemp(prefix="chatkeep-azurite-"))
    port = _free_port()
    command = [
        str(binary), "--blobHost", "127.0.0.1", "--blobPort", str(port),
        "--location", str(workdir), "--skipApiVersionCheck", "--loose", "--silent",
        "--disableTelemetry",
    ]  # fmt: skip
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def stop() -> None:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)

    atexit.register(shutil.rmtree, workdir, ignore_errors=True)
    atexit.register(stop)  # runs first: the data folder goes once Azurite has stopped
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and process.poll() is None:
        if _listening(port):
            return f"http://127.0.0.1:{port}/{AZURITE_ACCOUNT}"
        time.sleep(0.1)
    if process.poll() is not None:
        raise RuntimeError(f"Azurite ({binary}) exited at start with status {process.returncode}")
    stop()
    raise RuntimeError("Azurite did not start within 60 s")


def azure_store_url(cleanup: ExitStack, workdir: Path, repo: Path | None = None) -> str:
    """An ``azblob://`` store URL on a container of its own, on Azurite (the one on port
    10000, else this process's own, started on first use), or under
    ``CHATKEEP_TEST_AZURE_BLOB_URL`` (an ``azblob://`` URL). ``cleanup`` and ``workdir`` are
    kept for callers; the process's Azurite keeps its data in a temporary folder of its
    own, removed at exit."""
    configured = os.environ.get("CHATKEEP_TEST_AZURE_BLOB_URL")
    if configured and configured.startswith("azblob://"):
        parts = urlsplit(configured)
        return urlunsplit(parts._replace(path=f"{parts.path.rstrip('/')}/t-{_token()}"))
    standard = f"http://127.0.0.1:10000/{AZURITE_ACCOUNT}"
    try:
        if _listening(10000) and _dev_account_answers(standard):
            endpoint = standard
        else:
            checkout = repo or Path.cwd()
            endpoint = _process_server("azurite", lambda: _start_azurite(checkout))
    except Exception as exc:
        service_unavailable(f"no Azure Blob service for the tests: {exc}")
    options = {"connection_string": _connection_string(endpoint), "api_version": "2021-12-02"}
    return f"azblob://chatkeep-{_token()}/t?{urlencode(options, quote_via=quote)}"


def _path_suffixed(url: str, token: str) -> str:
    """``url`` with ``-<token>`` after its path (a prefix of its own in a bucket or
    container)."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=f"{parts.path.rstrip('/')}-{token}"))


def fresh_store_url(
    backend: str, request: pytest.FixtureRequest, directory: Path, name: str = "chats"
) -> str:
    """The URL of an empty store of its own on ``backend`` (``memory``, ``sqlite``,
    ``postgres``, ``redis``, ``s3`` or ``azure_blob``): a shared memory store or a file
    named ``name-<token>`` (in ``directory``), a namespace in the run's PostgreSQL schema
    or nested in its Redis namespace (so the run's cleanup erases it), a prefix in its
    bucket or container. A server's fixture is pulled in only when its backend is asked
    for (so a test run without that server never starts or needs it)."""
    token = secrets.token_hex(6)
    if backend == "memory":
        return f"memory://{name}-{token}"
    if backend == "sqlite":
        return f"sqlite:///{directory / f'{name}-{token}.db'}"
    if backend == "postgres":
        return with_query(request.getfixturevalue("postgres_url"), namespace=f"t{token}")
    if backend == "redis":
        base: str = request.getfixturevalue("redis_url")
        namespace = dict(parse_qsl(urlsplit(base).query))["namespace"]
        return with_query(base, namespace=f"{namespace}/{token}")
    if backend == "s3":
        return _path_suffixed(request.getfixturevalue("s3_url"), token)
    if backend == "azure_blob":
        return _path_suffixed(request.getfixturevalue("azure_url"), token)
    raise ValueError(f"no test store for backend {backend!r}")


# -- pytest fixtures: ``from chatkeep.testing.servers import FIXTURES`` in a conftest -------

#: The backends ``store_url`` goes through (S3 and Azure have fixtures of their own).
BACKENDS = ("sqlite", "postgres", "redis")


@pytest.fixture(scope="session")
def sqlite_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A SQLite store URL (a file of this test run)."""
    return f"sqlite:///{tmp_path_factory.mktemp('sqlite') / 'chats.db'}"


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A PostgreSQL store URL on a schema of this test run."""
    with ExitStack() as cleanup:
        yield postgres_store_url(cleanup)


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    """A Redis store URL with a namespace of this test run."""
    with ExitStack() as cleanup:
        yield redis_store_url(cleanup)


@pytest.fixture(scope="session")
def s3_url() -> Iterator[str]:
    """An S3 store URL (a moto server of this test run)."""
    with ExitStack() as cleanup:
        yield s3_store_url(cleanup)


@pytest.fixture(scope="session")
def azure_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """An Azure Blob store URL (Azurite)."""
    checkout = Path(__file__).resolve().parents[5]  # a source checkout's root, if this is one
    repo = checkout if (checkout / "packages" / "testing").is_dir() else Path.cwd()
    with ExitStack() as cleanup:
        yield azure_store_url(cleanup, tmp_path_factory.mktemp("azurite"), repo)


@pytest.fixture(params=BACKENDS)
def store_url(request: pytest.FixtureRequest) -> str:
    """A store URL on each of :data:`BACKENDS` in turn (shared by the run: use ``sid``)."""
    url: str = request.getfixturevalue(f"{request.param}_url")
    return url


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    """An open store on each backend in turn, closed after the test."""
    opened = open_store(store_url)
    yield opened
    opened.close()


@pytest.fixture
def sid() -> str:
    """A fresh session id."""
    return f"s-{secrets.token_hex(12)}"


#: Every fixture above, for ``from chatkeep.testing.servers import *`` style imports.
FIXTURES = (sqlite_url, postgres_url, redis_url, s3_url, azure_url, store_url, store, sid)
