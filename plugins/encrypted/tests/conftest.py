"""Keys for the encryption tests, set in the environment before anything opens a store, so
the conformance suite's worker processes (which reopen the URL alone) have them too.

The same goes for the throwaway moto server's dummy credentials: the suite's worker
processes start with the first class that needs them (memory, SQLite...), before the S3
fixture would put the credentials in the environment, so they are set here, up front
(unless the environment already has some, e.g. for ``CHATKEEP_TEST_S3_URL``)."""

from __future__ import annotations

import base64
import os

from chatkeep.testing.servers import azure_url, moto_credentials, postgres_url, redis_url, s3_url  # noqa: F401

PRIMARY = base64.urlsafe_b64encode(b"p" * 32).decode()
OLD = base64.urlsafe_b64encode(b"o" * 32).decode()
KEYS = f"primary:{PRIMARY},old:{OLD}"
os.environ["CHATKEEP_ENCRYPTION_KEYS"] = KEYS

if not os.environ.get("CHATKEEP_TEST_S3_URL"):
    for _name, _value in moto_credentials().items():
        os.environ.setdefault(_name, _value)
