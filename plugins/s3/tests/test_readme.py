"""Every example in the README runs as written: its Python blocks and its commands, against
the test endpoint (boto3 reads the endpoint from ``AWS_ENDPOINT_URL_S3``, so the URLs stay
exactly as the README shows them)."""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"


def _blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", README.read_text(encoding="utf-8"), re.S)


@pytest.fixture
def readme_env(s3_endpoint: Any) -> dict[str, str]:
    if not s3_endpoint.moto:
        pytest.skip("the README's examples name a bucket of their own: moto only")
    client = s3_endpoint.client()
    with contextlib.suppress(client.exceptions.BucketAlreadyOwnedByYou):
        client.create_bucket(
            Bucket="my-bucket", CreateBucketConfiguration={"LocationConstraint": "eu-west-1"}
        )
    return {**os.environ, "AWS_ENDPOINT_URL_S3": s3_endpoint.query["endpoint_url"]}


def test_the_python_examples_run(readme_env: dict[str, str]) -> None:
    blocks = _blocks("python")
    assert blocks
    for block in blocks:
        done = subprocess.run(
            [sys.executable, "-c", block],
            env=readme_env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, f"{block}\n{done.stderr}"
    assert "Record(id='m1'" in done.stdout


def test_the_migration_commands_run(readme_env: dict[str, str]) -> None:
    commands = [
        line.split("#")[0].strip()
        for block in _blocks("bash")
        for line in block.splitlines()
        if "chatkeep.s3.migrate" in line
    ]
    assert len(commands) == 2
    for command in commands:
        command = command.replace("python -m", f"{sys.executable} -m", 1)
        done = subprocess.run(
            command,
            shell=True,
            env=readme_env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, f"{command}\n{done.stderr}"
        assert "sessions" in done.stdout
