"""Throwaway PostgreSQL and Redis servers on spare ports, that the tests restart and kill.

The machine's shared servers are never touched: these are started from the same binaries
in temporary directories. PostgreSQL refuses to run as root, so as root its commands run as
the ``postgres`` user (Debian's packages create it).
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import redis

__all__ = ["ThrowawayPostgres", "ThrowawayRedis", "free_port"]


def free_port() -> int:
    """A TCP port nothing listens on right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _wait_for(check: object, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if check():  # type: ignore[operator]
                return
        except Exception:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"timed out waiting for {what}")


def _pg_bin(name: str) -> str:
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    if not candidates:
        raise RuntimeError(f"PostgreSQL's {name} is not installed")
    return candidates[-1]


class ThrowawayPostgres:
    """A PostgreSQL cluster of its own (fsync on: the durable default) in ``directory``."""

    def __init__(self, directory: Path) -> None:
        self._as_root = os.geteuid() == 0
        if self._as_root:
            # The postgres user must reach the directory: pytest's own (under a 0700
            # /tmp/pytest-of-root) is out of its reach, so use a folder of its own.
            directory = Path(tempfile.mkdtemp(prefix="chatkeep-pg-"))
            shutil.chown(directory, "postgres", "postgres")
        self.directory = directory
        self.data = directory / "data"
        self.port = free_port()
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, *command: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        prefix = ["runuser", "-u", "postgres", "--"] if self._as_root else []
        return subprocess.run(
            [*prefix, *command], capture_output=True, text=True, timeout=120, check=check
        )

    def start(self) -> None:
        """initdb (the first time) and start; returns when it accepts connections."""
        if not self.data.exists():
            self.directory.mkdir(parents=True, exist_ok=True)
            self._run(_pg_bin("initdb"), "-D", str(self.data), "-A", "trust", "-U", "postgres")
        options = f"-p {self.port} -k {self.directory} -c listen_addresses=127.0.0.1"
        self._run(
            _pg_bin("pg_ctl"), "-D", str(self.data), "-o", options,
            "-l", str(self.directory / "log"), "-w", "-t", "60", "start",
        )  # fmt: skip

    def restart(self) -> None:
        """A clean restart (every connection is closed under its client)."""
        self._run(_pg_bin("pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop")
        self.start()

    def kill(self) -> None:
        """SIGKILL the postmaster (and so every backend), then start it again: crash
        recovery replays the WAL, so every acknowledged commit is still there."""
        pid = int((self.data / "postmaster.pid").read_text().split()[0])
        os.kill(pid, signal.SIGKILL)
        # Its backends notice the postmaster's death and exit; until they have, a new
        # postmaster refuses the shared memory they still hold. Try until it starts.
        deadline = time.monotonic() + 60
        while True:
            try:
                self.start()
                return
            except subprocess.CalledProcessError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)

    def stop(self) -> None:
        """Stop for good and remove its files."""
        self._run(_pg_bin("pg_ctl"), "-D", str(self.data), "-m", "immediate", "stop", check=False)
        if self._as_root:
            shutil.rmtree(self.directory, ignore_errors=True)


class ThrowawayRedis:
    """A Redis of its own with an fsynced append-only file (so a kill -9 loses nothing
    acknowledged), in ``directory``."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self._process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        """Start; returns when it answers PING (after loading its AOF)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        self._process = subprocess.Popen(
            [
                "redis-server", "--port", str(self.port), "--bind", "127.0.0.1",
                "--dir", str(self.directory), "--appendonly", "yes",
                "--appendfsync", "always", "--save", "",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        client = redis.Redis(port=self.port, socket_timeout=2, socket_connect_timeout=2)
        _wait_for(client.ping, 60, f"redis on {self.port}")
        client.close()

    def restart(self) -> None:
        """SHUTDOWN (it writes nothing more: the AOF is already fsynced) and start."""
        client = redis.Redis(port=self.port, socket_timeout=5)
        with contextlib.suppress(redis.RedisError):
            client.shutdown(nosave=True)
        client.close()
        if self._process is not None:
            self._process.wait(30)
        self.start()

    def kill(self) -> None:
        """SIGKILL it and start it again from its AOF."""
        if self._process is not None:
            self._process.kill()
            self._process.wait(30)
        self.start()

    def stop(self) -> None:
        """Stop for good."""
        if self._process is not None:
            self._process.kill()
            self._process.wait(30)
