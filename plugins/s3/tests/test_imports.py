"""Importing the package, discovering plugins and opening another backend's store import no
boto3: only opening an S3 store does (issue 15: start-up cost)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

_PROBE = """
import sys
import chatkeep.s3
import chatkeep.s3.plugin
from chatkeep.s3 import CompactionResult, LegacyLayout, S3Options
from chatkeep.core import backends, open_store

S3Options(bucket="chats", prefix="p", namespace="acme/eu")
assert "s3" in set(backends())
store = open_store(sys.argv[1])
store.append("s", [("a", b"x")])
assert store.read("s") == [("a", b"x")]
store.close()
loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("boto3", "botocore", "s3transfer"))
print(",".join(loaded))
from chatkeep.s3 import S3Store
print("boto3" in sys.modules)
"""


def test_discovery_and_other_backends_import_no_driver(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'chats.db'}"
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, url], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    before, after = done.stdout.splitlines()
    assert before == "", f"imported without an S3 store being opened: {before}"
    assert after == "False"  # importing S3Store itself still does not; opening one does
