"""The part every client of this package shares: the ``AsyncOpenAI`` SDK client it calls
through, the model, extra request options, and a repr that shows no secret."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping
from typing import Any

import openai
from chatkeep.core import redact_url

__all__ = ["OpenAIClientBase"]


class OpenAIClientBase:
    """Holds the SDK client. Pass ``client=AsyncOpenAI(...)`` to share one, or the SDK's
    own arguments (``api_key``, ``base_url``, ``timeout``, ``max_retries``,
    ``default_headers``); without ``api_key`` the SDK reads ``OPENAI_API_KEY``.

    ``options`` are extra arguments for every request (``temperature``,
    ``max_output_tokens``, ``reasoning``, ...), merged under the ones the client sets.
    """

    #: Whether the service keeps the conversation (the client returns conversation ids).
    service_managed: bool = False

    def __init__(
        self,
        model: str,
        *,
        client: openai.AsyncOpenAI | None = None,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float | None = None,
        max_retries: int | None = None,
        default_headers: Mapping[str, str] | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> None:
        if not isinstance(model, str) or not model:
            raise ValueError("model must be a non-empty str (the model or deployment name)")
        self.model = model
        self.options: dict[str, Any] = dict(options or {})
        self._given = client
        settings: dict[str, Any] = {}
        if api_key is not None:
            settings["api_key"] = api_key
        if base_url is not None:
            settings["base_url"] = base_url
        if timeout is not None:
            settings["timeout"] = timeout
        if max_retries is not None:
            settings["max_retries"] = max_retries
        if default_headers is not None:
            settings["default_headers"] = dict(default_headers)
        self.__settings = settings  # holds the API key: never shown (see __repr__)
        # Built now so a missing key fails here, not on the first call.
        self._sdk_client = client if client is not None else openai.AsyncOpenAI(**settings)
        self._sdk_loop: asyncio.AbstractEventLoop | None = None

    @property
    def base_url(self) -> str:
        """The service's base URL (secrets in it redacted)."""
        return redact_url(str(self._sdk_client.base_url))

    async def sdk(self) -> openai.AsyncOpenAI:
        """The ``AsyncOpenAI`` client for the running event loop.

        An HTTP connection pool belongs to the event loop that opened it, and one object may
        serve several loops (``asyncio.run`` per call; ``Agent.run_sync`` keeps one loop per
        thread); so a client this object built is rebuilt when the loop changes (a client
        you passed in is always used as is).
        """
        if self._given is not None:
            return self._given
        loop = asyncio.get_running_loop()
        if self._sdk_loop is not None and self._sdk_loop is not loop:
            retired, self._sdk_client = self._sdk_client, openai.AsyncOpenAI(**self.__settings)
            # Closing marks it closed, so it does not try again, noisily, when collected;
            # its connections belong to the old loop and cannot be closed from this one.
            with contextlib.suppress(Exception):
                await retired.close()
        self._sdk_loop = loop
        return self._sdk_client

    async def aclose(self) -> None:
        """Close the HTTP connections of a client this object built."""
        if self._given is None:
            await self._sdk_client.close()

    def _request(self, **fields: Any) -> dict[str, Any]:
        request = {"model": self.model, **self.options}
        request.update({k: v for k, v in fields.items() if v is not None})
        return request

    def _describe(self) -> str:
        return f"model={self.model!r}, base_url={self.base_url!r}"

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._describe()})"
