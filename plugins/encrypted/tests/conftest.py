"""Keys for the encryption tests, set in the environment before anything opens a store, so
the conformance suite's worker processes (which reopen the URL alone) have them too."""

from __future__ import annotations

import base64
import os

from chatkeep.testing.servers import azure_url, postgres_url, redis_url, s3_url  # noqa: F401

PRIMARY = base64.urlsafe_b64encode(b"p" * 32).decode()
OLD = base64.urlsafe_b64encode(b"o" * 32).decode()
KEYS = f"primary:{PRIMARY},old:{OLD}"
os.environ["CHATKEEP_ENCRYPTION_KEYS"] = KEYS
