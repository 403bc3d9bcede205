"""Start-up stays light: importing the core, discovering every installed plugin and using a
SQLite store loads no other backend's driver, no cloud SDK, no framework and no test tool
(each is imported only by the store or adapter that needs it)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

#: Top-level modules that must not be loaded by the SQLite path. Each belongs to another
#: backend, a vendor client, a framework adapter or the test tooling.
HEAVY = frozenset(
    {
        "redis",
        "psycopg",
        "psycopg_pool",
        "boto3",
        "botocore",
        "aiobotocore",
        "s3transfer",
        "azure",
        "aiohttp",
        "httpx",
        "openai",
        "anthropic",
        "cryptography",
        "agents",
        "langchain_core",
        "langgraph",
        "agent_framework",
        "google",  # google-adk and google-genai (chatkeep-google-adk)
        "pydantic_ai",
        "llama_index",
        "strands",
        "pytest",
        "hypothesis",
        "moto",
    }
)

_PROGRAM = textwrap.dedent(
    """
    import json, sys
    from chatkeep.core import Record, backends, open_store

    names = sorted(backends())
    with open_store(sys.argv[1]) as store:
        store.append("s", [Record("a", b"{}")])
        assert store.read("s", -1) == [Record("a", b"{}")]
        assert list(store.list_sessions()) == ["s"]
    loaded = sorted({name.split(".")[0] for name in sys.modules})
    print(json.dumps({"backends": names, "loaded": loaded}))
    """
)


def _run(*args: str) -> dict[str, list[str]]:
    done = subprocess.run(
        [sys.executable, "-c", *args], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, list[str]] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def test_sqlite_path_loads_no_other_driver(tmp_path: Path) -> None:
    result = _run(_PROGRAM, f"sqlite:///{tmp_path / 'startup.db'}")
    # Every in-repo backend was discovered (their plugins loaded), yet none of their drivers.
    assert {"sqlite", "redis", "postgres", "s3", "azure-blob"} <= set(result["backends"])
    assert sorted(HEAVY & set(result["loaded"])) == []


@pytest.mark.parametrize(
    "module",
    [
        "chatkeep.core",
        "chatkeep.sqlite",
        "chatkeep.redis",
        "chatkeep.postgres",
        "chatkeep.s3",
        "chatkeep.azure_blob",
    ],
)
def test_importing_a_package_loads_no_driver(module: str) -> None:
    program = (
        f"import json, sys, {module}\n"
        "print(json.dumps({'loaded': sorted({m.split('.')[0] for m in sys.modules})}))"
    )
    assert sorted(HEAVY & set(_run(program)["loaded"])) == []


def test_the_check_can_fail() -> None:
    """The same probe sees a driver when one is imported (so the checks above can fail)."""
    program = (
        "import json, sys, chatkeep.postgres\n"
        "chatkeep.postgres.PostgresStore\n"
        "print(json.dumps({'loaded': sorted({m.split('.')[0] for m in sys.modules})}))"
    )
    assert "psycopg" in _run(program)["loaded"]


#: What the CLI itself must not load for a plain listing: rich draws only on a terminal.
CLI_HEAVY = HEAVY | {"rich", "chatkeep.testing", "chatkeep.vendors"}

_CLI_PROGRAM = textwrap.dedent(
    """
    import contextlib, io, json, sys
    from chatkeep.core import Record, open_store
    from chatkeep.cli.main import main

    with open_store(sys.argv[1]) as store:
        store.append("s", [Record("a", b'{"type": "message", "role": "user", "contents": []}')])
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["sessions", "list", "--url", sys.argv[1]]) == 0
        assert main(["--help"]) == 0
    names = set(sys.modules)
    print(json.dumps({"loaded": sorted(names | {n.split(".")[0] for n in names})}))
    """
)


def test_the_cli_on_sqlite_loads_no_driver_rich_or_test_tooling(tmp_path: Path) -> None:
    result = _run(_CLI_PROGRAM, f"sqlite:///{tmp_path / 'cli.db'}")
    assert sorted(CLI_HEAVY & set(result["loaded"])) == []
    assert "click" in result["loaded"] and "chatkeep.cli.sessions" in result["loaded"]
