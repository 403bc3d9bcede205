"""Turning a URL and options into settings and Azure clients, without leaking secrets.

URL form: ``azblob://CONTAINER[/PREFIX][?option=value&...]``. Options may also be passed as
keyword arguments (which win over the URL, ``prefix=`` included). See the README for the list.

One rule for names, as on every chatkeep backend: a ``%XX`` escape in the URL's path or
query is decoded once, by URL parsing (``azblob://c/a%2Fb`` is the prefix ``a/b``); a
keyword argument is taken literally (``prefix="a%2Fb"`` is those five characters, and the
blob names hold them as they are).
"""

from __future__ import annotations

import inspect
import ipaddress
import os
import random
import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from chatkeep.core.backend import check_namespace

from ._state import Limits
from .errors import AzureBlobConfigError
from .layout import LAYOUTS, normalize_root, store_base

__all__ = ["ENV_CONNECTION_STRING", "SCHEME", "Settings", "parse_settings"]

SCHEME = "azblob"
ENV_CONNECTION_STRING = "AZURE_STORAGE_CONNECTION_STRING"

_CONTAINER = re.compile(r"^(?:\$root|[a-z0-9](?:[a-z0-9]|-(?=[a-z0-9])){2,62})$")

# Options accepted in the URL's query string, with their types.
_STRING_OPTIONS = {
    "connection_string",
    "account_url",
    "account_name",
    "account_key",
    "sas_token",
    "credential",
    "api_version",
    "namespace",
    "resend_check",
}
_BOOL_OPTIONS = {"create_container"}
_INT_OPTIONS = {"retries", "segment_blocks", "segment_bytes", "max_block_bytes", "cache_sessions"}
_FLOAT_OPTIONS = {"retry_backoff", "timeout", "connect_timeout", "contention_timeout"}
# Options that only make sense as Python objects (keyword arguments).
_OBJECT_OPTIONS = {"credential", "async_credential", "transport", "async_transport"}
KNOWN_OPTIONS = frozenset(
    _STRING_OPTIONS | _BOOL_OPTIONS | _INT_OPTIONS | _FLOAT_OPTIONS | _OBJECT_OPTIONS
) | {"layout"}


@dataclass(frozen=True)
class Settings:
    """Everything a store needs to build its clients. Secrets are excluded from the repr."""

    container: str
    root: str  #: the prefix, ``""`` or ending in ``/``
    base: str  #: where this store's sessions live: ``{root}chatkeep-v2/{namespace}/``
    endpoint: str  #: safe to show: scheme://host[/account], no query
    auth: str  #: how it authenticates, for reprs and errors (never the secret)
    connection_string: str | None = field(default=None, repr=False)
    account_url: str | None = field(default=None, repr=False)
    credential: Any = field(default=None, repr=False)
    async_credential: Any = field(default=None, repr=False)
    owns_credentials: bool = False
    namespace: str | None = None
    layout: int = 2  #: the blob layout (1: what releases before layout 2 wrote)
    api_version: str | None = None
    create_container: bool = True
    retries: int = 4
    retry_backoff: float = 0.25
    timeout: float = 30.0
    connect_timeout: float = 10.0
    cache_sessions: int = 512
    limits: Limits = field(default_factory=Limits)
    transport: Any = field(default=None, repr=False)
    async_transport: Any = field(default=None, repr=False)

    @property
    def sync_available(self) -> bool:
        """Whether a sync client can be built (not with an async-only credential)."""
        return not (self.credential is None and self.async_credential is not None)

    @property
    def async_available(self) -> bool:
        """Whether a native async client can be built (else async calls use threads)."""
        return not (self.async_credential is None and self.credential is not None)

    def client_options(self) -> dict[str, Any]:
        """Keyword arguments shared by the sync and async container clients."""
        options: dict[str, Any] = {
            "connection_timeout": self.connect_timeout,
            "read_timeout": self.timeout,
            "max_single_get_size": self.limits.max_get,
            "max_single_put_size": 64 * 1024 * 1024,
        }
        if self.api_version:
            options["api_version"] = self.api_version
        return options

    def sync_container(self) -> Any:
        """A new ``azure.storage.blob.ContainerClient``."""
        from azure.storage.blob import ContainerClient, ExponentialRetry

        class _Retry(ExponentialRetry):
            def get_backoff_time(_self, settings: dict[str, Any]) -> float:
                return _backoff(self.retry_backoff, int(settings["count"]))

        options = self.client_options()
        options["retry_policy"] = _Retry(retry_total=self.retries)
        if self.transport is not None:
            options["transport"] = self.transport
        if self.connection_string is not None:
            return ContainerClient.from_connection_string(
                self.connection_string, self.container, **options
            )
        assert self.account_url is not None
        return ContainerClient(self.account_url, self.container, self.credential, **options)

    def async_container(self) -> Any:
        """A new ``azure.storage.blob.aio.ContainerClient``."""
        from azure.storage.blob.aio import ContainerClient, ExponentialRetry

        class _Retry(ExponentialRetry):
            def get_backoff_time(_self, settings: dict[str, Any]) -> float:
                return _backoff(self.retry_backoff, int(settings["count"]))

        options = self.client_options()
        options["retry_policy"] = _Retry(retry_total=self.retries)
        if self.async_transport is not None:
            options["transport"] = self.async_transport
        if self.connection_string is not None:
            return ContainerClient.from_connection_string(
                self.connection_string, self.container, **options
            )
        assert self.account_url is not None
        credential = self.async_credential if self.async_credential is not None else None
        return ContainerClient(self.account_url, self.container, credential, **options)


def _backoff(base: float, count: int) -> float:
    """Exponential backoff with jitter, capped at 8 s (the SDK's default starts at 15 s)."""
    return float(min(8.0, base * 2**count) * random.uniform(0.5, 1.0))


def _convert(name: str, value: Any) -> Any:
    if not isinstance(value, str):
        return value
    try:
        if name in _BOOL_OPTIONS:
            lowered = value.lower()
            if lowered not in ("1", "0", "true", "false", "yes", "no", "on", "off"):
                raise ValueError
            return lowered in ("1", "true", "yes", "on")
        if name in _INT_OPTIONS:
            return int(value)
        if name in _FLOAT_OPTIONS:
            return float(value)
    except ValueError:
        # The value is not echoed: it might be a mistyped secret.
        raise AzureBlobConfigError(f"option {name!r} has an invalid value") from None
    return value


def _account_name_from_url(account_url: str) -> tuple[str | None, str]:
    """The account name an account URL implies, and a display form without any query."""
    parts = urlsplit(account_url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise AzureBlobConfigError("account_url must be an http(s) URL of the blob endpoint")
    host = parts.hostname
    path_account = parts.path.strip("/").split("/")[0] or None
    try:
        ipaddress.ip_address(host)
        is_ip = True
    except ValueError:
        is_ip = host == "localhost"
    name = path_account if (is_ip or path_account) else host.split(".")[0]
    port = f":{parts.port}" if parts.port else ""
    shown = f"{parts.scheme}://{host}{port}" + (f"/{path_account}" if path_account else "")
    return name, shown


def _endpoint_from_connection_string(connection_string: str) -> tuple[str, str]:
    """(display endpoint, auth label) of a connection string, parsed without echoing it."""
    fields: dict[str, str] = {}
    for piece in connection_string.split(";"):
        key, sep, value = piece.partition("=")
        if sep:
            fields[key.strip().lower()] = value.strip()
    if not fields:
        raise AzureBlobConfigError("the connection string is not 'Key=Value;...' pairs")
    if "usedevelopmentstorage" in fields:
        endpoint = "http://127.0.0.1:10000/devstoreaccount1"
    elif "blobendpoint" in fields:
        endpoint = _account_name_from_url(fields["blobendpoint"])[1]
    else:
        account = fields.get("accountname", "?")
        protocol = fields.get("defaultendpointsprotocol", "https")
        suffix = fields.get("endpointsuffix", "core.windows.net")
        endpoint = f"{protocol}://{account}.blob.{suffix}"
    if "sharedaccesssignature" in fields:
        auth = "connection string (SAS)"
    elif "accountkey" in fields or "usedevelopmentstorage" in fields:
        auth = "connection string (account key)"
    else:
        auth = "connection string (anonymous)"
    return endpoint, auth


def parse_settings(url: str | None, options: dict[str, Any]) -> Settings:
    """Settings from an ``azblob://`` URL (or ``None`` with ``container=`` in ``options``)."""
    options = dict(options)
    container = options.pop("container", None)
    has_prefix = "prefix" in options
    prefix = options.pop("prefix", "")
    if url is not None:
        try:
            parts = urlsplit(url)
        except ValueError:
            raise AzureBlobConfigError("the store URL cannot be parsed") from None
        if parts.scheme.lower() not in (SCHEME, "azure-blob"):
            raise AzureBlobConfigError(f"expected an {SCHEME}:// URL")
        container = unquote(parts.netloc) or container
        if not has_prefix:  # a prefix= keyword wins over the URL's path, even "/"
            prefix = unquote(parts.path)
        from_query = dict(parse_qsl(parts.query, keep_blank_values=True))
        for name, value in from_query.items():
            options.setdefault(name, value)
    unknown = sorted(set(options) - KNOWN_OPTIONS)
    if unknown:
        raise AzureBlobConfigError(
            f"unknown option(s) {', '.join(map(repr, unknown))}; known options: "
            + ", ".join(sorted(KNOWN_OPTIONS))
        )
    values = {name: _convert(name, value) for name, value in options.items()}
    if not isinstance(container, str) or not _CONTAINER.match(container):
        raise AzureBlobConfigError(
            "the container name must be 3-63 lowercase letters, digits and single hyphens "
            f"(as in {SCHEME}://my-container/optional/prefix)"
        )
    if not isinstance(prefix, str):
        raise AzureBlobConfigError(f"prefix must be a str, not {type(prefix).__name__}")
    try:
        root = normalize_root(prefix)
    except ValueError as exc:
        raise AzureBlobConfigError(str(exc)) from None
    namespace = values.pop("namespace", None)
    if namespace is not None:
        check_namespace(namespace)
    layout = _layout(values.pop("layout", 2))
    if layout == 1 and namespace is not None:
        raise AzureBlobConfigError(
            "layout=1 has no namespaces (it is the layout releases before namespaces "
            "wrote): drop namespace=, or use layout 2"
        )
    auth_fields = _auth(values)
    limits = Limits(
        max_block=min(values.pop("max_block_bytes", Limits.max_block), Limits.max_block),
        segment_blocks=values.pop("segment_blocks", Limits.segment_blocks),
        segment_bytes=values.pop("segment_bytes", Limits.segment_bytes),
        contention_timeout=values.pop("contention_timeout", Limits.contention_timeout),
        resend_check=values.pop("resend_check", Limits.resend_check),
    )
    if limits.resend_check not in ("session", "recent"):
        raise AzureBlobConfigError("resend_check must be 'session' or 'recent'")
    if limits.segment_blocks < 3 or limits.segment_blocks > 50_000:
        raise AzureBlobConfigError("segment_blocks must be between 3 and 50,000")
    if limits.max_block < 1024:
        raise AzureBlobConfigError("max_block_bytes must be at least 1 KiB")
    return Settings(
        container=container,
        root=root,
        base=store_base(root, namespace, layout),
        namespace=namespace,
        layout=layout,
        limits=limits,
        api_version=values.get("api_version"),
        create_container=values.get("create_container", True),
        retries=values.get("retries", 4),
        retry_backoff=values.get("retry_backoff", 0.25),
        timeout=values.get("timeout", 30.0),
        connect_timeout=values.get("connect_timeout", 10.0),
        cache_sessions=values.get("cache_sessions", 512),
        transport=values.get("transport"),
        async_transport=values.get("async_transport"),
        **auth_fields,
    )


def _layout(value: Any) -> int:
    """The ``layout`` option: 1 or 2, as an int or its digit (from a URL)."""
    if isinstance(value, str) and value.strip() in ("1", "2"):
        return int(value)
    if isinstance(value, int) and not isinstance(value, bool) and value in LAYOUTS:
        return value
    raise AzureBlobConfigError("option 'layout' must be 1 or 2 (the default)")


def _is_async_credential(credential: Any) -> bool:
    get_token = getattr(credential, "get_token", None)
    return get_token is not None and inspect.iscoroutinefunction(get_token)


def _credentials(
    values: dict[str, Any], account_name: str | None, account_url: str
) -> tuple[Any, Any, bool, str]:
    """(sync credential, async credential, whether the store owns them, auth label)."""
    account_key = values.get("account_key")
    sas_token = values.get("sas_token")
    credential = values.get("credential")
    async_credential = values.get("async_credential")
    given = [n for n in ("account_key", "sas_token", "credential") if values.get(n) is not None]
    if len(given) > 1:
        raise AzureBlobConfigError(f"give only one of {', '.join(given)}")
    if account_key is not None:
        from azure.core.credentials import AzureNamedKeyCredential

        if not account_name:
            raise AzureBlobConfigError("account_key= needs account_name= for this account_url")
        shared = AzureNamedKeyCredential(account_name, account_key)
        return shared, shared, False, "account key"
    if sas_token is not None:
        from azure.core.credentials import AzureSasCredential

        sas = AzureSasCredential(sas_token.lstrip("?"))
        return sas, sas, False, "SAS token"
    if credential == "default":
        try:
            from azure.identity import DefaultAzureCredential
            from azure.identity.aio import DefaultAzureCredential as AsyncDefaultAzureCredential
        except ImportError:
            raise AzureBlobConfigError(
                "credential='default' needs azure-identity: "
                "pip install 'chatkeep-azure-blob[identity]'"
            ) from None
        pair = DefaultAzureCredential(), AsyncDefaultAzureCredential()
        return pair[0], pair[1], True, "DefaultAzureCredential"
    if isinstance(credential, str):
        raise AzureBlobConfigError(
            "credential= takes 'default' or a credential object; pass a SAS token as "
            "sas_token= and an account key as account_key="
        )
    if credential is not None and _is_async_credential(credential):
        credential, async_credential = None, credential
    if credential is not None or async_credential is not None:
        name = type(credential if credential is not None else async_credential).__name__
        return credential, async_credential, False, f"token credential ({name})"
    if "sig=" in account_url:
        return None, None, False, "SAS in account_url"
    return None, None, False, "anonymous"


def _auth(values: dict[str, Any]) -> dict[str, Any]:
    """The auth-related Settings fields, from the options or the environment."""
    connection_string = values.get("connection_string")
    account_url = values.get("account_url")
    if connection_string is None and account_url is None:
        connection_string = os.environ.get(ENV_CONNECTION_STRING) or None
        if connection_string is None:
            raise AzureBlobConfigError(
                "no way to reach the storage account: give connection_string=, or account_url= "
                "with account_key=, sas_token= or credential=, or set "
                f"{ENV_CONNECTION_STRING}"
            )
    if connection_string is not None:
        if any(values.get(n) is not None for n in ("account_url", "account_key", "credential")):
            raise AzureBlobConfigError(
                "connection_string= already names the account and its credential; do not "
                "combine it with account_url=, account_key= or credential="
            )
        endpoint, auth = _endpoint_from_connection_string(connection_string)
        return {"connection_string": connection_string, "endpoint": endpoint, "auth": auth}
    assert account_url is not None
    account_name, endpoint = _account_name_from_url(account_url)
    credential, async_credential, owns, auth = _credentials(
        values, values.get("account_name") or account_name, account_url
    )
    return {
        "account_url": account_url,
        "endpoint": endpoint,
        "auth": auth,
        "credential": credential,
        "async_credential": async_credential,
        "owns_credentials": owns,
    }
