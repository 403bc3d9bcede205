"""Private: carrying out :mod:`._operations` with the Azure SDK, sync and async.

Every SDK failure becomes a :class:`~._operations.ServiceError` subclass
(:func:`.faults.translate`) that keeps only the HTTP status and the service's error code:
the SDK's own messages can quote request signatures, so they are never passed on.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import OrderedDict
from typing import Any, TypeVar

from azure.core import MatchConditions
from azure.core.exceptions import AzureError, HttpResponseError

from ._operations import (
    Append,
    Appended,
    Blob,
    Create,
    CreateContainer,
    Created,
    Delete,
    Get,
    Head,
    ListNames,
    ListTop,
    Op,
    SetMetadata,
    Sleep,
    Upload,
)
from .faults import translate

__all__ = ["AsyncDriver", "SyncDriver"]

T = TypeVar("T")


def _total_size(content_range: str | None) -> int | None:
    if not content_range or "/" not in content_range:
        return None
    tail = content_range.rsplit("/", 1)[1].strip()
    return int(tail) if tail.isdigit() else None


def _blob_from(data: bytes, offset: int, properties: Any, size: int) -> Blob:
    return Blob(
        data=data,
        offset=offset,
        size=size,
        etag=str(properties.etag),
        metadata=dict(properties.metadata or {}),
        blocks=int(properties.append_blob_committed_block_count or 0),
    )


def _append_kwargs(op: Append) -> dict[str, Any]:
    kwargs: dict[str, Any] = {"appendpos_condition": op.position}
    if op.etag is not None:
        kwargs["etag"] = op.etag
        kwargs["match_condition"] = MatchConditions.IfNotModified
    return kwargs


def _appended(result: Any) -> Appended:
    return Appended(
        etag=str(result["etag"]),
        offset=int(result["blob_append_offset"]),
        blocks=int(result["blob_committed_block_count"]),
    )


class _ClientCache:
    """Blob clients by name (building one parses URLs; turns reuse the same few). They
    share the container client's pipeline, so connections are pooled. Thread-safe."""

    def __init__(self, container: Any, size: int = 256) -> None:
        self.container = container
        self._size = size
        self._lock = threading.Lock()
        self._clients: OrderedDict[str, Any] = OrderedDict()

    def get(self, name: str) -> Any:
        with self._lock:
            client = self._clients.get(name)
            if client is None:
                client = self._clients[name] = self.container.get_blob_client(name)
                if len(self._clients) > self._size:
                    self._clients.popitem(last=False)
            return client


class SyncDriver:
    """Runs operations with a sync ``ContainerClient``."""

    def __init__(self, container: Any) -> None:
        self.container = container
        self._blobs = _ClientCache(container)

    def execute(self, op: Op) -> Any:
        """Carry out ``op``; raise a :class:`ServiceError` on failure."""
        try:
            return self._execute(op)
        except AzureError as error:
            raise translate(error) from None

    def _head(self, name: str, offset: int) -> Blob:
        properties = self._blobs.get(name).get_blob_properties()
        return _blob_from(b"", offset, properties, int(properties.size))

    def _execute(self, op: Op) -> Any:
        if isinstance(op, Get):
            try:
                stream = self._blobs.get(op.blob).download_blob(
                    offset=op.offset, length=op.length, max_concurrency=1
                )
            except HttpResponseError as error:
                if error.status_code == 416:  # offset at or past the end
                    return self._head(op.blob, op.offset)
                raise
            data = stream.readall()
            size = _total_size(stream.properties.content_range)
            if size is None:
                return self._head(op.blob, op.offset)
            return _blob_from(data, op.offset, stream.properties, size)
        if isinstance(op, Append):
            result = self._blobs.get(op.blob).append_block(op.data, **_append_kwargs(op))
            return _appended(result)
        if isinstance(op, Head):
            return self._head(op.blob, 0)
        if isinstance(op, Create):
            result = self._blobs.get(op.blob).create_append_blob(
                metadata=dict(op.metadata), match_condition=MatchConditions.IfMissing
            )
            return Created(str(result["etag"]))
        if isinstance(op, CreateContainer):
            try:
                self.container.create_container()
            except HttpResponseError as error:
                if error.status_code != 409:
                    raise
            return None
        if isinstance(op, Upload):
            self._blobs.get(op.blob).upload_blob(op.data, overwrite=True, max_concurrency=1)
            return None
        if isinstance(op, SetMetadata):
            self._blobs.get(op.blob).set_blob_metadata(dict(op.metadata))
            return None
        if isinstance(op, Delete):
            self._blobs.get(op.blob).delete_blob(delete_snapshots="include")
            return None
        if isinstance(op, ListNames):
            return list(self.container.list_blob_names(name_starts_with=op.prefix))
        if isinstance(op, ListTop):
            pages = self.container.walk_blobs(
                name_starts_with=op.prefix, delimiter="/", results_per_page=op.limit
            ).by_page()
            return [str(item.name) for item in next(pages, [])][: op.limit]
        if isinstance(op, Sleep):
            time.sleep(op.seconds)
            return None
        raise TypeError(f"unknown operation {op!r}")

    def close(self) -> None:
        """Close the client's connections."""
        self.container.close()


class AsyncDriver:
    """Runs operations with an ``azure.storage.blob.aio.ContainerClient``."""

    def __init__(self, container: Any) -> None:
        self.container = container
        self._blobs = _ClientCache(container)

    async def execute(self, op: Op) -> Any:
        """Carry out ``op``; raise a :class:`ServiceError` on failure."""
        try:
            return await self._execute(op)
        except AzureError as error:
            raise translate(error) from None

    async def _head(self, name: str, offset: int) -> Blob:
        properties = await self._blobs.get(name).get_blob_properties()
        return _blob_from(b"", offset, properties, int(properties.size))

    async def _execute(self, op: Op) -> Any:
        if isinstance(op, Get):
            try:
                stream = await self._blobs.get(op.blob).download_blob(
                    offset=op.offset, length=op.length, max_concurrency=1
                )
            except HttpResponseError as error:
                if error.status_code == 416:
                    return await self._head(op.blob, op.offset)
                raise
            data = await stream.readall()
            size = _total_size(stream.properties.content_range)
            if size is None:
                return await self._head(op.blob, op.offset)
            return _blob_from(data, op.offset, stream.properties, size)
        if isinstance(op, Append):
            result = await self._blobs.get(op.blob).append_block(op.data, **_append_kwargs(op))
            return _appended(result)
        if isinstance(op, Head):
            return await self._head(op.blob, 0)
        if isinstance(op, Create):
            result = await self._blobs.get(op.blob).create_append_blob(
                metadata=dict(op.metadata), match_condition=MatchConditions.IfMissing
            )
            return Created(str(result["etag"]))
        if isinstance(op, CreateContainer):
            try:
                await self.container.create_container()
            except HttpResponseError as error:
                if error.status_code != 409:
                    raise
            return None
        if isinstance(op, Upload):
            await self._blobs.get(op.blob).upload_blob(op.data, overwrite=True, max_concurrency=1)
            return None
        if isinstance(op, SetMetadata):
            await self._blobs.get(op.blob).set_blob_metadata(dict(op.metadata))
            return None
        if isinstance(op, Delete):
            await self._blobs.get(op.blob).delete_blob(delete_snapshots="include")
            return None
        if isinstance(op, ListNames):
            names = self.container.list_blob_names(name_starts_with=op.prefix)
            return [name async for name in names]
        if isinstance(op, ListTop):
            pages = self.container.walk_blobs(
                name_starts_with=op.prefix, delimiter="/", results_per_page=op.limit
            ).by_page()
            try:
                page = await pages.__anext__()
            except StopAsyncIteration:
                return []
            return [str(item.name) async for item in page][: op.limit]
        if isinstance(op, Sleep):
            await asyncio.sleep(op.seconds)
            return None
        raise TypeError(f"unknown operation {op!r}")

    async def close(self) -> None:
        """Close the client's connections."""
        await self.container.close()
