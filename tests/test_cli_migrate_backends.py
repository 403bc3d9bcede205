"""``chatkeep migrate`` as users run it: the console script in a subprocess, between every
ordered pair of the in-repo backends that outlive a process (SQLite, Redis, PostgreSQL,
S3 on moto, Azure Blob on Azurite), verified; and a migration killed with SIGKILL part way
and run again, which must finish with no duplicates.

The Python API underneath has its own tests (``tests/test_transfer_backends.py``); these
check what the command adds: opening both URLs, exit codes, progress and the summary.
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit, urlunsplit

import pytest

from chatkeep.core import Record, Store, fork, open_store
from chatkeep.testing.servers import (  # noqa: F401  (fixtures)
    azure_url,
    postgres_url,
    redis_url,
    s3_url,
    with_query,
)

CHATKEEP = Path(sys.executable).with_name("chatkeep")
BACKENDS = ["sqlite", "redis", "postgres", "s3", "azure_blob"]
PAIRS = [(a, b) for a in BACKENDS for b in BACKENDS if a != b]


def _suffixed(url: str, token: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=f"{parts.path.rstrip('/')}-{token}"))


@pytest.fixture(scope="module")
def fresh(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[object]:
    """``fresh(backend) -> url``: a URL of an empty store of its own; every store made is
    erased at the end of the module."""
    directory = tmp_path_factory.mktemp("cli-migrate")
    made: list[str] = []

    def make(backend: str) -> str:
        token = secrets.token_hex(6)
        if backend == "sqlite":
            url = f"sqlite:///{directory / f'chats-{token}.db'}"
        elif backend == "postgres":
            url = with_query(request.getfixturevalue("postgres_url"), namespace=f"m{token}")
        elif backend == "redis":
            base: str = request.getfixturevalue("redis_url")
            namespace = dict(parse_qsl(urlsplit(base).query))["namespace"]
            url = with_query(base, namespace=f"{namespace}/{token}")
        elif backend == "s3":
            url = _suffixed(request.getfixturevalue("s3_url"), token)
        else:
            url = _suffixed(request.getfixturevalue("azure_url"), token)
        made.append(url)
        return url

    yield make
    for url in made:
        with open_store(url) as store:
            for session_id in list(store.list_sessions()):
                store.delete(session_id)


def everything(store: Store) -> dict[str, list[Record]]:
    return {session_id: store.read(session_id) for session_id in sorted(store.list_sessions())}


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHATKEEP_")}
    return subprocess.run(
        [str(CHATKEEP), *args],
        check=False,
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.parametrize(("source", "destination"), PAIRS, ids=[f"{a}-to-{b}" for a, b in PAIRS])
def test_migrate_between_every_pair(
    source: str, destination: str, fresh: object, tmp_path: Path
) -> None:
    make = fresh
    assert callable(make)
    src_url, dst_url = make(source), make(destination)
    with open_store(src_url) as src:
        src.append("bytes", [Record(f"b{i}", bytes([i, 0, 255 - i]) * 7) for i in range(5)])
        src.append("chat", [Record(f"c{i}", b'{"n": %d}' % i) for i in range(9)])
        fork(src, "chat", new_session_id="chat-fork")
        expected = everything(src)
    done = run("migrate", src_url, dst_url, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "verified" in done.stderr
    with open_store(dst_url) as dst:
        assert everything(dst) == expected
    again = run("migrate", src_url, dst_url, cwd=tmp_path)  # a second run copies nothing
    assert again.returncode == 0, again.stderr
    with open_store(dst_url) as dst:
        assert everything(dst) == expected


@pytest.mark.slow
@pytest.mark.parametrize("destination", ["sqlite", "postgres"])
def test_a_migrate_killed_part_way_resumes_without_duplicates(
    destination: str, fresh: object, tmp_path: Path
) -> None:
    make = fresh
    assert callable(make)
    src_url, dst_url = make("sqlite"), make(destination)
    with open_store(src_url) as src:
        for session in range(40):
            src.append(
                f"s{session:02}", [Record(f"r{n}", b"x" * 200 + b"%d" % n) for n in range(1500)]
            )
        expected = everything(src)
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHATKEEP_")}
    child = subprocess.Popen(
        [str(CHATKEEP), "migrate", src_url, dst_url],
        cwd=tmp_path,
        env=env,
        stderr=subprocess.DEVNULL,
    )
    # Kill it as soon as the destination holds something: part of the copy is done.
    deadline = time.monotonic() + 120
    with open_store(dst_url) as watching:
        while child.poll() is None and time.monotonic() < deadline:
            if next(iter(watching.list_sessions()), None) is not None:
                break
            time.sleep(0.01)
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=60)
    assert child.returncode == -signal.SIGKILL, "it finished before the kill"
    with open_store(dst_url) as dst:
        copied = sum(len(dst.read(s)) for s in dst.list_sessions())
    total = sum(len(records) for records in expected.values())
    assert 0 < copied < total, (copied, total)
    again = run("migrate", src_url, dst_url, cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert "verified" in again.stderr
    with open_store(dst_url) as dst:
        assert everything(dst) == expected  # every record once, in order
