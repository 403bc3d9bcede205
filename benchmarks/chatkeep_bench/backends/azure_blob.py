"""Azure Blob Storage (through Azurite, on 127.0.0.1): chatkeep vs hand-written
azure-storage-blob. No peer library keeps chat history on Azure Blob: no peer rows.

Only run when asked for (``--backends azure_blob``). An Azurite already on the standard
port 10000 is used; otherwise one is started on a free port with its data in the run's
temporary folder (installed with npm into ``<repo>/.cache/azurite`` the first time, as the
plugin's tests do), and stopped at the end.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import socket
import struct
import subprocess
import time
from pathlib import Path
from typing import Any

from chatkeep.core import new_id

from ..variants import (
    AnyVariant,
    ChatkeepAsyncStore,
    ChatkeepHistoryProvider,
    ChatkeepStore,
    Kind,
    Level,
    Unavailable,
    Variant,
    batches,
    role_of,
)
from ..workload import WINDOW, encode_dict, exchange, message_dict, payload
from . import BackendRun, Context, ServiceMissing

__all__ = ["RawAzureBlob", "setup"]

#: The emulator's published development account (documented by Microsoft; not a secret).
DEV_ACCOUNT = "devstoreaccount1"
DEV_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
API_VERSION = "2021-12-02"
REPO = Path(__file__).resolve().parents[3]
_LENGTH = struct.Struct(">I")


def _connection_string(endpoint: str) -> str:
    return (
        f"DefaultEndpointsProtocol=http;AccountName={DEV_ACCOUNT};AccountKey={DEV_KEY};"
        f"BlobEndpoint={endpoint};"
    )


class RawAzureBlob(Variant):
    """The floor on Azure Blob: one append blob per session of length-prefixed records;
    the load is one ranged download from the 50th-last record to the end (which also
    brings any other writer's appends), the append one Append Block conditional on the
    append position. The process remembers record offsets from its own writes and reads.
    No record ids, no segment rolling (an append blob holds 50,000 blocks)."""

    kind: Kind = "raw"

    def __init__(self, container: Any, prefix: str, *, decode: bool) -> None:
        self.name = "raw azure-storage-blob + json" if decode else "raw azure-storage-blob"
        self.level: Level = "messages" if decode else "records"
        self._container = container
        self._prefix = prefix + ("rawjson/" if decode else "raw/")
        self._decode = decode
        self._offsets: dict[str, list[int]] = {}  # start offsets of the newest records
        self._ends: dict[str, int] = {}

    def _blob(self, session_id: str) -> Any:
        return self._container.get_blob_client(self._prefix + session_id)

    def _append(self, session_id: str, records: list[bytes]) -> None:
        blob = self._blob(session_id)
        if session_id not in self._ends:
            blob.create_append_blob()
            self._ends[session_id] = 0
            self._offsets[session_id] = []
        end = self._ends[session_id]
        body = b"".join(_LENGTH.pack(len(data)) + data for data in records)
        blob.append_block(body, appendpos_condition=end)
        offsets = self._offsets[session_id]
        for data in records:
            offsets.append(end)
            end += _LENGTH.size + len(data)
        del offsets[:-WINDOW]
        self._ends[session_id] = end

    def _data(self, role: str, number: int) -> bytes:
        if self._decode:
            return encode_dict(message_dict(role, number, new_id()))
        return payload(role, number % 128)

    def fill(self, session_id: str, count: int) -> None:
        for part in batches(count):
            self._append(session_id, [self._data(role_of(n), n) for n in part])

    def load(self, session_id: str) -> object:
        offsets = self._offsets.get(session_id)
        if not offsets:
            return []
        start = offsets[-WINDOW] if len(offsets) >= WINDOW else offsets[0]
        body = self._blob(session_id).download_blob(offset=start).readall()
        records, position = [], 0
        while position < len(body):
            (size,) = _LENGTH.unpack_from(body, position)
            records.append(body[position + _LENGTH.size : position + _LENGTH.size + size])
            position += _LENGTH.size + size
        # (records past the known end would come from another writer: none here)
        tail = records[-WINDOW:]
        if self._decode:
            return [json.loads(data) for data in tail]
        return tail

    def turn(self, session_id: str, number: int) -> None:
        self.load(session_id)
        self._append(session_id, [self._data(kind, number) for kind in exchange(number)])


def _listening(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.5):
        return True
    return False


def _azurite(workdir: Path) -> tuple[subprocess.Popen[bytes] | None, str]:
    """An Azurite endpoint: the standard port's, or a new process."""
    if _listening(10000):
        return None, f"http://127.0.0.1:10000/{DEV_ACCOUNT}"
    directory = REPO / ".cache" / "azurite"
    binary = directory / "node_modules" / ".bin" / "azurite-blob"
    if not binary.exists():
        found = shutil.which("azurite-blob")
        if found:
            binary = Path(found)
        elif shutil.which("npm"):
            subprocess.run(
                ["npm", "install", "--prefix", str(directory), "azurite@3", "--no-audit",
                 "--no-fund", "--loglevel=error"],
                check=False, capture_output=True, timeout=600,
            )  # fmt: skip
    if not binary.exists():
        raise ServiceMissing("Azurite is not installed and npm could not install it")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    location = workdir / "azurite"
    location.mkdir()
    process = subprocess.Popen(
        [str(binary), "--blobHost", "127.0.0.1", "--blobPort", str(port), "--location",
         str(location), "--skipApiVersionCheck", "--loose", "--silent", "--disableTelemetry"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and process.poll() is None:
        if _listening(port):
            return process, f"http://127.0.0.1:{port}/{DEV_ACCOUNT}"
        time.sleep(0.1)
    process.kill()
    raise ServiceMissing("Azurite did not start")


def setup(context: Context) -> BackendRun:
    """Azurite; chatkeep on ``azblob://ckbench-<token>/ck``, the raw blobs beside it."""
    try:
        from azure.storage.blob import BlobServiceClient
    except ImportError as exc:
        raise ServiceMissing("azure-storage-blob is not installed") from exc
    process, endpoint = _azurite(context.workdir)
    container_name = f"ckbench-{context.token}"
    service = BlobServiceClient.from_connection_string(
        _connection_string(endpoint), api_version=API_VERSION
    )
    container = service.create_container(container_name)
    from urllib.parse import quote

    url = (
        f"azblob://{container_name}/ck?connection_string={quote(_connection_string(endpoint))}"
        f"&api_version={API_VERSION}"
    )
    variants: list[AnyVariant | Unavailable] = [
        RawAzureBlob(container, "", decode=False),
        ChatkeepStore(url),
        ChatkeepAsyncStore(url),
        RawAzureBlob(container, "", decode=True),
        ChatkeepHistoryProvider(url.replace("/ck?", "/ckp?")),
        ChatkeepHistoryProvider(url.replace("/ck?", "/ckr?"), resumed=True),
    ]

    def cleanup() -> None:
        with contextlib.suppress(Exception):
            container.delete_container()
        service.close()
        if process is not None:
            process.terminate()
            process.wait(10)

    return BackendRun(
        "azure_blob",
        f"Azurite at {endpoint}, container {container_name} (deleted after)",
        variants,
        [cleanup],
    )
