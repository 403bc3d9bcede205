"""S3 (through a moto server the harness starts on 127.0.0.1): chatkeep vs hand-written
boto3. No peer library keeps chat history on S3, so there are no peer rows.

Only run when asked for (``--backends s3``); needs ``moto[server]``. The bucket lives in
moto's memory and goes away with the server at the end.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import socket
import struct
import subprocess
import sys
import time
from typing import Any

from chatkeep.core import new_id

from ..variants import (
    AnyVariant,
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

__all__ = ["RawS3", "setup"]

_LENGTH = struct.Struct(">I")


def _pack(records: list[bytes]) -> bytes:
    return b"".join(_LENGTH.pack(len(data)) + data for data in records)


def _unpack(body: bytes) -> list[bytes]:
    records, offset = [], 0
    while offset < len(body):
        (size,) = _LENGTH.unpack_from(body, offset)
        offset += _LENGTH.size
        records.append(body[offset : offset + size])
        offset += size
    return records


class RawS3(Variant):
    """The floor of a multi-writer append log on S3 whose client remembers what it read
    (what chatkeep does with a warm handle): the load is one LIST after the last known
    object (new objects, from other writers, are fetched; here there are none) and the
    process's cached tail; the append is one conditional PUT (``If-None-Match: *``) of one
    object holding the exchange. No record ids, no compaction."""

    kind: Kind = "raw"

    def __init__(self, client: Any, bucket: str, prefix: str, *, decode: bool) -> None:
        self.name = "raw boto3 + json" if decode else "raw boto3"
        self.level: Level = "messages" if decode else "records"
        self._client = client
        self._bucket = bucket
        self._prefix = prefix + ("rawjson/" if decode else "raw/")
        self._decode = decode
        self._tails: dict[str, list[bytes]] = {}
        self._ends: dict[str, int] = {}

    def _key(self, session_id: str, start: int) -> str:
        return f"{self._prefix}{session_id}/seg/{start:016d}"

    def _put(self, session_id: str, records: list[bytes]) -> None:
        end = self._ends.get(session_id, 0)
        self._client.put_object(
            Bucket=self._bucket,
            Key=self._key(session_id, end),
            Body=_pack(records),
            IfNoneMatch="*",
        )
        self._ends[session_id] = end + len(records)
        tail = self._tails.setdefault(session_id, [])
        tail.extend(records)
        del tail[:-WINDOW]

    def _data(self, role: str, number: int) -> bytes:
        if self._decode:
            return encode_dict(message_dict(role, number, new_id()))
        return payload(role, number % 128)

    def fill(self, session_id: str, count: int) -> None:
        for part in batches(count):
            self._put(session_id, [self._data(role_of(n), n) for n in part])

    def load(self, session_id: str) -> object:
        end = self._ends.get(session_id, 0)
        after = self._key(session_id, end - 1) if end else ""
        page = self._client.list_objects_v2(
            Bucket=self._bucket, Prefix=f"{self._prefix}{session_id}/seg/", StartAfter=after
        )
        for item in page.get("Contents", []):  # another writer's objects (none here)
            body = self._client.get_object(Bucket=self._bucket, Key=item["Key"])["Body"].read()
            records = _unpack(body)
            self._tails.setdefault(session_id, []).extend(records)
            self._ends[session_id] = end = end + len(records)
        tail = self._tails.get(session_id, [])[-WINDOW:]
        if self._decode:
            return [json.loads(data) for data in tail]
        return tail

    def turn(self, session_id: str, number: int) -> None:
        self.load(session_id)
        self._put(session_id, [self._data(kind, number) for kind in exchange(number)])


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _start_moto() -> tuple[subprocess.Popen[bytes], str]:
    """moto in a process of its own: in this one it would share the GIL with the turns
    being timed, and tracemalloc would count the server's allocations as the client's."""
    port = _free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and process.poll() is None:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.5):
            return process, f"http://127.0.0.1:{port}"
        time.sleep(0.1)
    process.kill()
    raise ServiceMissing("the moto server did not start")


def setup(context: Context) -> BackendRun:
    """Start moto on a free loopback port; chatkeep on ``s3://ckbench-<token>/ck``."""
    try:
        import boto3  # type: ignore[import-untyped]
    except ImportError:
        raise ServiceMissing("boto3 is not installed (pip install chatkeep-s3)") from None
    if importlib.util.find_spec("moto") is None:
        raise ServiceMissing("moto is not installed (pip install 'moto[server]')")
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        os.environ.setdefault(name, "ckbench")  # moto accepts any
    process, endpoint = _start_moto()

    def stop() -> None:
        process.terminate()
        process.wait(10)

    bucket = f"ckbench-{context.token}"
    try:
        client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
        client.create_bucket(Bucket=bucket)
    except Exception:
        stop()
        raise
    url = f"s3://{bucket}/ck?endpoint_url={endpoint}&region=us-east-1"
    variants: list[AnyVariant | Unavailable] = [
        RawS3(client, bucket, "", decode=False),
        ChatkeepStore(url),
        RawS3(client, bucket, "", decode=True),
        ChatkeepHistoryProvider(url.replace("/ck?", "/ckp?")),
        ChatkeepHistoryProvider(url.replace("/ck?", "/ckr?"), resumed=True),
    ]
    return BackendRun(
        "s3",
        f"moto server at {endpoint}, bucket {bucket} (in memory, gone after)",
        variants,
        [stop],
    )
