"""Test harness: an Azurite blob service for the whole session, and store helpers.

Where the service comes from, in order:

1. ``CHATKEEP_TEST_AZURE_BLOB_URL``: either an ``azblob://container/prefix?...`` URL (its
   container and options are used; tests add their own prefixes), or the blob endpoint of an
   emulator using the well-known development account (``http://127.0.0.1:10000/devstoreaccount1``).
2. An Azurite already listening on the standard port 10000.
3. A throwaway Azurite started here on a free loopback port. It is installed with npm into
   ``<repo>/.cache/azurite`` the first time (``CHATKEEP_AZURITE_DIR`` moves that folder).

When none works the Azure tests are skipped with the reason, or fail under ``CI=true``.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import socket
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode, urlsplit

import pytest

from chatkeep.core import Store, open_store
from chatkeep.testing.services import service_unavailable

#: The emulator's published development account (documented by Microsoft; not a secret).
DEV_ACCOUNT = "devstoreaccount1"
DEV_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
#: The API version the tests pin (Azurite also runs with --skipApiVersionCheck).
API_VERSION = "2021-12-02"
AZURITE_PACKAGE = "azurite@3"

REPO = Path(__file__).resolve().parents[3]


def dev_connection_string(endpoint: str) -> str:
    """A connection string for the development account at ``endpoint``."""
    return (
        f"DefaultEndpointsProtocol=http;AccountName={DEV_ACCOUNT};AccountKey={DEV_KEY};"
        f"BlobEndpoint={endpoint};"
    )


@dataclass
class BlobService:
    """Where the tests' blobs go: a container and the options that reach it."""

    container: str
    options: dict[str, str]
    prefix: str = ""
    endpoint: str | None = None  #: set for an emulator with the development account
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    def url(self, prefix: str | None = None, **options: Any) -> str:
        """An ``azblob://`` URL under a fresh (or the given) prefix, with extra options."""
        prefix = prefix if prefix is not None else f"t-{uuid.uuid4().hex[:12]}"
        path = "/".join(p for p in (self.prefix.strip("/"), prefix) if p)
        query = {**self.options, **{k: str(v) for k, v in options.items()}}
        return f"azblob://{self.container}/{path}?{urlencode(query, quote_via=quote)}"

    def names(self, prefix: str = "") -> list[str]:
        """Blob names under ``prefix`` (relative to this service's own prefix), read
        through a client built like the store's (the layout tests look at them)."""
        from chatkeep.core import open_store

        store = open_store(self.url())
        client = store.backend._settings.sync_container()  # type: ignore[attr-defined]
        base = self.prefix.strip("/") + "/" if self.prefix.strip("/") else ""
        try:
            names = client.list_blob_names(name_starts_with=base + prefix)
            return [name[len(base) :] for name in names]
        finally:
            client.close()
            store.close()


def _unavailable(reason: str) -> None:
    service_unavailable(f"Azure Blob tests need a blob service: {reason}")


def _listening(port: int, timeout: float = 0.5) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout):
        return True
    return False


def _answers_as_dev_account(endpoint: str) -> bool:
    from azure.storage.blob import BlobServiceClient

    client = BlobServiceClient(
        endpoint,
        credential={"account_name": DEV_ACCOUNT, "account_key": DEV_KEY},
        retry_total=0,
        connection_timeout=2,
        read_timeout=5,
    )
    try:
        client.get_service_properties()
    except Exception:
        return False
    finally:
        client.close()
    return True


def _azurite_dir() -> Path:
    return Path(os.environ.get("CHATKEEP_AZURITE_DIR") or REPO / ".cache" / "azurite")


def _azurite_binary() -> Path:
    """The azurite-blob executable, installing Azurite with npm if it is missing."""
    directory = _azurite_dir()
    binary = directory / "node_modules" / ".bin" / "azurite-blob"
    if binary.exists():
        return binary
    found = shutil.which("azurite-blob")
    if found:
        return Path(found)
    npm = shutil.which("npm")
    if npm is None or shutil.which("node") is None:
        raise RuntimeError("Node.js and npm are needed to install Azurite (not on PATH)")
    directory.mkdir(parents=True, exist_ok=True)
    # Several pytest-xdist workers may get here at once: one installs, the others wait.
    with open(directory.parent / "azurite.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not binary.exists():
            result = subprocess.run(
                [
                    npm,
                    "install",
                    "--prefix",
                    str(directory),
                    AZURITE_PACKAGE,
                    "--no-audit",
                    "--no-fund",
                    "--loglevel=error",
                ],
                capture_output=True,
                text=True,
                timeout=600,
                check=False,
            )
            if result.returncode != 0 or not binary.exists():
                raise RuntimeError(f"npm install {AZURITE_PACKAGE} failed: {result.stderr[-800:]}")
    return binary


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _start_azurite(workspace: Path) -> tuple[subprocess.Popen[bytes], int]:
    binary = _azurite_binary()
    last_error = ""
    for _ in range(3):
        port = _free_port()
        log = workspace / f"azurite-{port}.log"
        command = [
            str(binary), "--blobHost", "127.0.0.1", "--blobPort", str(port),
            "--location", str(workspace), "--skipApiVersionCheck", "--loose", "--silent",
            "--disableTelemetry",
        ]  # fmt: skip
        with open(log, "wb") as output:
            process = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and process.poll() is None:
            if _listening(port, 0.2):
                return process, port
            time.sleep(0.1)
        if process.poll() is None:
            process.kill()
            process.wait(10)
        last_error = log.read_text(errors="replace")[-800:]
    raise RuntimeError(f"Azurite did not start: {last_error}")


def _from_override(value: str) -> BlobService:
    parts = urlsplit(value)
    if parts.scheme == "azblob":
        options = dict(parse_qsl(parts.query, keep_blank_values=True))
        return BlobService(parts.netloc, options, prefix=parts.path.strip("/"))
    if parts.scheme in ("http", "https"):
        endpoint = value.rstrip("/")
        container = f"chatkeep-tests-{uuid.uuid4().hex[:8]}"
        options = {"connection_string": dev_connection_string(endpoint), "api_version": API_VERSION}
        return BlobService(container, options, endpoint=endpoint)
    raise ValueError("CHATKEEP_TEST_AZURE_BLOB_URL must be an azblob:// or http(s):// URL")


@pytest.fixture(scope="session")
def blob_service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BlobService]:
    """The blob service every Azure test uses (see the module docstring)."""
    override = os.environ.get("CHATKEEP_TEST_AZURE_BLOB_URL")
    if override:
        yield _from_override(override)
        return
    container = f"chatkeep-tests-{uuid.uuid4().hex[:8]}"
    standard = f"http://127.0.0.1:10000/{DEV_ACCOUNT}"
    if _listening(10000) and _answers_as_dev_account(standard):
        options = {"connection_string": dev_connection_string(standard), "api_version": API_VERSION}
        yield BlobService(container, options, endpoint=standard)
        return
    try:
        process, port = _start_azurite(tmp_path_factory.mktemp("azurite"))
    except Exception as exc:
        _unavailable(str(exc))
        return
    endpoint = f"http://127.0.0.1:{port}/{DEV_ACCOUNT}"
    options = {"connection_string": dev_connection_string(endpoint), "api_version": API_VERSION}
    try:
        yield BlobService(container, options, endpoint=endpoint, process=process)
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)


@pytest.fixture
def open_azure(blob_service: BlobService) -> Iterator[Callable[..., Store]]:
    """Open stores on the test service (fresh prefix unless ``prefix=``); closed at the end."""
    opened: list[Store] = []

    def factory(prefix: str | None = None, **options: Any) -> Store:
        objects = {k: v for k, v in options.items() if not isinstance(v, (str, int, float))}
        plain = {k: v for k, v in options.items() if k not in objects}
        store = open_store(blob_service.url(prefix, **plain), **objects)
        opened.append(store)
        return store

    yield factory
    for store in opened:
        store.close()


@pytest.fixture
def azure_store(open_azure: Callable[..., Store]) -> Store:
    """A store under a fresh prefix of the test container."""
    return open_azure()


# -- fault injection on the wire: transports that count, lose responses or fail --------


def _is_append(request: Any) -> bool:
    return request.method == "PUT" and "comp=appendblock" in request.url


class Wire:
    """What a test transport saw and what it should break.

    ``lose(n)``: the next ``n`` Append Block requests reach the service but their
    responses are "lost" (the transport raises as if the connection dropped).
    ``refuse(n)``: the next ``n`` Append Block requests fail before being sent.
    """

    def __init__(self) -> None:
        self.requests: list[tuple[str, str, str | None]] = []
        self.to_lose = 0
        self.to_refuse = 0
        self.lost = 0
        self.refused = 0

    def lose(self, count: int = 1) -> None:
        self.to_lose = count

    def refuse(self, count: int = 1) -> None:
        self.to_refuse = count

    def reset(self) -> None:
        self.requests.clear()

    def before(self, request: Any) -> None:
        from azure.core.exceptions import ServiceRequestError

        self.requests.append((request.method, request.url, request.headers.get("x-ms-range")))
        if self.to_refuse and _is_append(request):
            self.to_refuse -= 1
            self.refused += 1
            raise ServiceRequestError("injected: connection refused before sending")

    def after(self, request: Any) -> None:
        from azure.core.exceptions import ServiceResponseError

        if self.to_lose and _is_append(request):
            self.to_lose -= 1
            self.lost += 1
            raise ServiceResponseError("injected: the response was lost")


@pytest.fixture
def wire() -> Wire:
    """A :class:`Wire` to pass to :func:`sync_transport` / :func:`async_transport`."""
    return Wire()


@pytest.fixture
def sync_transport(wire: Wire) -> Any:
    """A requests transport that reports to (and obeys) ``wire``."""
    from azure.core.pipeline.transport import RequestsTransport

    class Transport(RequestsTransport):  # type: ignore[misc]
        def send(self, request: Any, **kwargs: Any) -> Any:
            wire.before(request)
            response = super().send(request, **kwargs)
            wire.after(request)
            return response

    return Transport()


@pytest.fixture
def async_transport(wire: Wire) -> Any:
    """An aiohttp transport that reports to (and obeys) ``wire``."""
    from azure.core.pipeline.transport import AioHttpTransport

    class Transport(AioHttpTransport):  # type: ignore[misc]
        async def send(self, request: Any, **kwargs: Any) -> Any:
            wire.before(request)
            response = await super().send(request, **kwargs)
            wire.after(request)
            return response

    return Transport()


# -- an in-memory blob service speaking the algorithm's operations ----------------------


class FakeBlobService:
    """Append and block blobs in a dict, with the service's conditional semantics, and
    faults to inject: ``fault(kind, mode)`` breaks the next operation of type ``kind``:

    - ``"lost"``: it is carried out, then reported as an unknown outcome;
    - ``"failed"``: it is not carried out, and reported as an unknown outcome;
    - ``"retried"``: it is carried out, then reported as a failed condition (what a client
      that retried a request which had landed sees).
    """

    MAX_BLOCKS = 50_000

    def __init__(self) -> None:
        self.blobs: dict[str, dict[str, Any]] = {}
        self.container = True
        self.operations: list[Any] = []
        self.faults: list[tuple[type, str]] = []
        self.etags = 0
        self.downloaded = 0  #: bytes returned by Get operations
        self.lock = __import__("threading").Lock()

    def fault(self, kind: type, mode: str, times: int = 1) -> None:
        self.faults.extend([(kind, mode)] * times)

    def _etag(self) -> str:
        self.etags += 1
        return f'"{self.etags}"'

    def count(self, kind: type) -> int:
        return sum(isinstance(op, kind) for op in self.operations)

    def execute(self, op: Any) -> Any:
        from chatkeep.azure_blob import _operations as ops

        with self.lock:
            self.operations.append(op)
            mode = None
            for index, (kind, how) in enumerate(self.faults):
                if isinstance(op, kind):
                    mode = how
                    del self.faults[index]
                    break
            if mode == "failed":
                raise ops.OutcomeUnknown(None, "injected")
            result = self._apply(op)
            if mode == "lost":
                raise ops.OutcomeUnknown(None, "injected")
            if mode == "retried":
                raise ops.ConditionFailed(412, "AppendPositionConditionNotMet")
            return result

    async def aexecute(self, op: Any) -> Any:
        return self.execute(op)

    def _blob_result(self, blob: dict[str, Any], offset: int, length: int) -> Any:
        from chatkeep.azure_blob._operations import Blob

        data = bytes(blob["data"][offset : offset + length]) if offset < len(blob["data"]) else b""
        self.downloaded += len(data)
        return Blob(data, offset, len(blob["data"]), blob["etag"], dict(blob["metadata"]),
                    blob["blocks"])  # fmt: skip

    def _apply(self, op: Any) -> Any:
        from chatkeep.azure_blob import _operations as ops

        def missing() -> Exception:
            if not self.container:
                return ops.ContainerMissing(404, "ContainerNotFound")
            return ops.BlobMissing(404, "BlobNotFound")

        blob = self.blobs.get(getattr(op, "blob", ""))
        if isinstance(op, ops.Get):
            if blob is None or not self.container:
                raise missing()
            return self._blob_result(blob, op.offset, op.length)
        if isinstance(op, ops.Head):
            if blob is None or not self.container:
                raise missing()
            return self._blob_result(blob, 0, 0)
        if isinstance(op, ops.Append):
            if blob is None or not self.container:
                raise missing()
            if len(op.data) > 4 * 1024 * 1024:
                raise ops.Rejected(413, "RequestBodyTooLarge")
            if op.position != len(blob["data"]) or (
                op.etag is not None and op.etag != blob["etag"]
            ):
                raise ops.ConditionFailed(412, "AppendPositionConditionNotMet")
            if blob["blocks"] >= self.MAX_BLOCKS:
                raise ops.SegmentFull(409, "BlockCountExceedsLimit")
            offset = len(blob["data"])
            blob["data"] += op.data
            blob["blocks"] += 1
            blob["etag"] = self._etag()
            return ops.Appended(blob["etag"], offset, blob["blocks"])
        if isinstance(op, ops.Create):
            if not self.container:
                raise missing()
            if blob is not None:
                raise ops.BlobExists(409, "BlobAlreadyExists")
            etag = self._etag()
            self.blobs[op.blob] = {"data": bytearray(), "metadata": dict(op.metadata),
                                   "etag": etag, "blocks": 0}  # fmt: skip
            return ops.Created(etag)
        if isinstance(op, ops.CreateContainer):
            self.container = True
            return None
        if isinstance(op, ops.Upload):
            if not self.container:
                raise missing()
            self.blobs[op.blob] = {"data": bytearray(op.data), "metadata": {},
                                   "etag": self._etag(), "blocks": 0}  # fmt: skip
            return None
        if isinstance(op, ops.SetMetadata):
            if blob is None:
                raise missing()
            blob["metadata"] = dict(op.metadata)
            blob["etag"] = self._etag()
            return None
        if isinstance(op, ops.Delete):
            if blob is None:
                raise missing()
            del self.blobs[op.blob]
            return None
        if isinstance(op, ops.ListNames):
            if not self.container:
                raise missing()
            return sorted(name for name in self.blobs if name.startswith(op.prefix))
        if isinstance(op, ops.ListTop):
            if not self.container:
                raise missing()
            top: set[str] = set()
            for name in self.blobs:
                if name.startswith(op.prefix):
                    rest = name[len(op.prefix) :]
                    top.add(op.prefix + rest.partition("/")[0] + ("/" if "/" in rest else ""))
            return sorted(top)[: op.limit]
        if isinstance(op, ops.Sleep):
            return None
        raise TypeError(op)


@pytest.fixture
def fake_service() -> FakeBlobService:
    """An empty :class:`FakeBlobService`."""
    return FakeBlobService()


@pytest.fixture
def fake_store(fake_service: FakeBlobService) -> Callable[..., Any]:
    """Build ``AzureBlobStore`` handles wired to ``fake_service`` (options as keywords)."""
    from types import SimpleNamespace

    from chatkeep.azure_blob.store import AzureBlobStore

    def factory(**options: Any) -> AzureBlobStore:
        options.setdefault("connection_string", dev_connection_string("http://127.0.0.1:1/x"))
        store = AzureBlobStore("fake", "root", **options)
        sync = SimpleNamespace(execute=fake_service.execute, container=None, close=lambda: None)

        async def aclose() -> None:
            return None

        asynchronous = SimpleNamespace(execute=fake_service.aexecute, close=aclose)
        store._sync = sync  # type: ignore[assignment]
        store._async = asynchronous  # type: ignore[assignment]
        return store

    return factory
