"""Every in-repo backend reports bad configuration the same way: chatkeep.core.InvalidOption."""

from __future__ import annotations

import pytest

from chatkeep.core import InvalidOption, open_store

# URLs that parse without contacting a server (stores connect lazily).
URLS = {
    "sqlite": "sqlite://:memory:",
    "postgres": "postgresql://postgres@127.0.0.1:5432/test",
    "s3": "s3://bucket/prefix?endpoint_url=http://127.0.0.1:9",
    "azure-blob": "azblob://container/prefix?connection_string=UseDevelopmentStorage%3Dtrue",
    "redis": "redis://127.0.0.1:6379/0",
}


@pytest.mark.parametrize("backend", sorted(URLS))
def test_out_of_range_ttl_is_invalid_option(backend: str) -> None:
    # Backends without retention refuse the option itself; the others refuse the value.
    with pytest.raises(InvalidOption):
        open_store(URLS[backend], ttl=-5)


@pytest.mark.parametrize("backend", sorted(set(URLS) - {"redis"}))
def test_unknown_option_is_invalid_option(backend: str) -> None:
    # (Redis hands options it does not know to redis-py, by design: see its README.)
    with pytest.raises(InvalidOption, match="bogus_option"):
        open_store(URLS[backend], bogus_option=1)
