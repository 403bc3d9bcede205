"""The one place the test matrix lives: members x backends x checks.

``nox -t ci`` runs everything CI needs; ``nox -s demo`` runs the demo; ``./run tests`` runs
the ``ci`` sessions in two streams side by side, longest first by :data:`TIMINGS`, and
prints the budget at the end (``.ci/streams.py``).

Environments (DESIGN section 12): every session tagged ``workspace`` shares one virtual
environment, ``.nox/_workspace``, synced from the committed lock file with
``uv sync --locked --all-packages --all-extras`` by the first session of a run (the others
find it up to date in about a second). ``oldest`` (Python 3.10) and ``demo`` (the install a
user gets) keep environments of their own. Each ``ci`` session carries one group tag
(:data:`GROUPS`) and has an entry in :data:`TIMINGS`; ``tests/test_ci_budget.py`` checks both.
"""

from __future__ import annotations

import fcntl
import glob
import os
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

import nox

nox.options.default_venv_backend = "uv"
nox.options.error_on_missing_interpreters = True
nox.options.sessions = ["lint", "types", "tests", "conformance", "repo", "reliability", "demo"]

ROOT = Path(__file__).parent
MEMBERS = {
    "core": "core",
    "sqlite": "plugins/sqlite",
    "redis": "plugins/redis",
    "postgres": "plugins/postgres",
    "s3": "plugins/s3",
    "azure_blob": "plugins/azure_blob",
    "encrypted": "plugins/encrypted",
    "testing": "packages/testing",
    "cli": "packages/cli",
    "openai": "packages/openai",
    "anthropic": "packages/anthropic",
    "vendors": "packages/vendors",
    "fake_model": "packages/fake_model",
    "openai_agents": "packages/openai_agents",
    "langchain": "packages/langchain",
    "agent_framework": "packages/agent_framework",
    "langgraph": "packages/langgraph",
    "llama_index": "packages/llama_index",
    "strands": "packages/strands",
    "google_adk": "packages/google_adk",
    "pydantic_ai": "packages/pydantic_ai",
    "web": "packages/web",
}
BACKENDS = ["memory", "sqlite", "redis", "postgres", "s3", "azure_blob", "encrypted"]
TYPED = ["core/src", *(f"{path}/src" for name, path in MEMBERS.items() if name != "core")]


def _members() -> dict[str, str]:
    """Members present in this checkout (a plugin folder may not exist yet)."""
    return {
        name: path for name, path in MEMBERS.items() if (ROOT / path / "pyproject.toml").exists()
    }


#: The shared environment of the ``workspace`` group (the whole workspace, all extras).
WORKSPACE = ROOT / ".nox" / "_workspace"
#: Group tags: every ``ci`` session carries exactly one. ``workspace`` sessions share
#: :data:`WORKSPACE`; the others build an environment of their own.
GROUPS = ("workspace", "oldest", "demo")

#: Seconds each ``ci`` session takes (how it was measured: README, "Testing and the CI
#: budget"). ``./run tests`` starts the longest first and prints the measured times beside
#: these; update an entry when its session moves by more than half a minute.
TIMINGS: dict[str, int] = {
    "repo": 545,
    "tests(member='testing')": 220,
    "conformance(backend='s3')": 185,
    "oldest": 160,
    "reliability": 125,
    "tests(member='langgraph')": 95,
    "tests(member='cli')": 80,
    "conformance(backend='redis')": 70,
    "conformance(backend='azure_blob')": 70,
    "conformance(backend='encrypted')": 65,
    "tests(member='openai_agents')": 65,
    "conformance(backend='postgres')": 55,
    "types": 50,
    "tests(member='s3')": 50,
    "tests(member='google_adk')": 50,
    "tests(member='llama_index')": 50,
    "tests(member='redis')": 45,
    "tests(member='agent_framework')": 40,
    "tests(member='pydantic_ai')": 35,
    "conformance(backend='sqlite')": 35,
    "tests(member='langchain')": 30,
    "tests(member='web')": 30,
    "tests(member='core')": 30,
    "tests(member='azure_blob')": 25,
    "tests(member='strands')": 25,
    "tests(member='postgres')": 15,
    "tests(member='sqlite')": 15,
    "tests(member='openai')": 15,
    "tests(member='fake_model')": 15,
    "tests(member='encrypted')": 10,
    "tests(member='vendors')": 10,
    "conformance(backend='memory')": 10,
    "tests(member='anthropic')": 10,
    "lint": 5,
    "demo": 5,
}


def _install(session: nox.Session) -> None:
    """Sync the shared workspace environment from the lock (under a lock file: two streams
    may get here at once) and point the session's commands and their children at it."""
    WORKSPACE.parent.mkdir(parents=True, exist_ok=True)
    with open(WORKSPACE.parent / "_workspace.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        # nox's own interpreter makes the environment; once it exists, uv keeps it (a nox
        # run from inside it, as tests/test_ci_budget.py does, must not rebuild it).
        python = [] if (WORKSPACE / "pyvenv.cfg").exists() else [f"--python={sys.executable}"]
        session.run_install(
            *("uv", "sync", "--locked", "--all-packages", "--all-extras", *python),
            env={"UV_PROJECT_ENVIRONMENT": str(WORKSPACE)},
            external=True,
        )
    session.env["VIRTUAL_ENV"] = str(WORKSPACE)
    session.env["PATH"] = os.pathsep.join([str(WORKSPACE / "bin"), os.environ.get("PATH", "")])


def _bin(name: str) -> str:
    """A program of the shared workspace environment."""
    return str(WORKSPACE / "bin" / name)


def _pytest(session: nox.Session, *args: str, python: str | None = None) -> None:
    """pytest with the ten slowest tests reported; the run fails unless at least one test
    ran (pytest's exit 5, nothing collected, fails too; so does a run that skipped all)."""
    with tempfile.TemporaryDirectory() as scratch:
        report = Path(scratch, "junit.xml")
        session.run(
            python or _bin("python"), "-m", "pytest", "-p", "no:cacheprovider",
            "--durations=10", f"--junitxml={report}", *args, *session.posargs,
        )  # fmt: skip
        _require_tests_ran(session, report)


def _require_tests_ran(session: nox.Session, report: Path) -> None:
    """Fail the session when the junit report shows no test that ran (all skipped)."""
    try:
        root = ET.parse(report).getroot()  # noqa: S314 (our own pytest wrote it)
    except (OSError, ET.ParseError) as exc:
        session.error(f"no pytest report at {report}: {exc}")
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    ran = sum(int(s.get("tests", 0)) - int(s.get("skipped", 0)) for s in suites)
    if ran <= 0:
        session.error("no test ran (every test was skipped or none was collected)")
    session.log(f"{ran} tests ran")


@nox.session(venv_backend="none", tags=["ci", "workspace"])
def lint(session: nox.Session) -> None:
    """ruff: lint and formatting."""
    _install(session)
    session.run(_bin("ruff"), "check", ".")
    session.run(_bin("ruff"), "format", "--check", ".")


@nox.session(venv_backend="none", tags=["ci", "workspace"])
def types(session: nox.Session) -> None:
    """mypy --strict on every member's source."""
    _install(session)
    present = [path for path in TYPED if (ROOT / path).exists()]
    session.run(_bin("mypy"), *present)


@nox.session(venv_backend="none", tags=["ci", "workspace"])
@nox.parametrize("member", list(MEMBERS))
def tests(session: nox.Session, member: str) -> None:
    """A member's own tests (its conformance run is in the conformance session)."""
    path = _members().get(member)
    if path is None:
        session.skip(f"{member} is not in this checkout")
    _install(session)
    # A backend's conformance file runs in the conformance session, not twice.
    skip = ["--ignore-glob=*test_*conformance*.py"] if path.startswith("plugins/") else []
    _pytest(session, f"{path}/tests", *skip)


@nox.session(venv_backend="none", tags=["ci", "workspace"])
@nox.parametrize("backend", BACKENDS)
def conformance(session: nox.Session, backend: str) -> None:
    """The conformance suite against one backend (real servers for server backends)."""
    _install(session)
    if backend == "memory":
        with tempfile.TemporaryDirectory() as scratch:
            report = Path(scratch, "junit.xml")
            session.run(
                _bin("chatkeep"), "conformance", "memory://", "--",
                "--durations=10", f"--junitxml={report}",
            )  # fmt: skip
            _require_tests_ran(session, report)
        return
    path = _members().get(backend)
    if path is None:
        session.skip(f"{backend} is not in this checkout")
    files = sorted(
        str(p.relative_to(ROOT)) for p in (ROOT / path / "tests").glob("test_*conformance*.py")
    )
    if not files:
        session.error(f"{backend} has no conformance test file")
    _pytest(session, *files)


def _oldest_python() -> str | None:
    """A Python 3.10 interpreter on this machine (PATH, or pyenv's versions), if any.

    uv would otherwise try to download one, which needs a network the CI machine lacks.
    """
    found = shutil.which("python3.10")
    candidates = [found] if found else []
    candidates += sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.10*/bin/python3.10")))
    for candidate in candidates:
        try:
            version = subprocess.run(
                [candidate, "-c", "import sys; print(sys.version_info[:2] == (3, 10))"],
                capture_output=True,
                text=True,
                timeout=30,
                check=False,
            ).stdout.strip()
        except OSError:
            continue
        if version == "True":
            return candidate
    return None


OLDEST_PYTHON = _oldest_python()


# Part of the CI run wherever a 3.10 interpreter exists (it does on the CI machine).
@nox.session(python=OLDEST_PYTHON or "3.10", tags=["ci", "oldest"] if OLDEST_PYTHON else ["oldest"])
def oldest(session: nox.Session) -> None:
    """The oldest supported Python (3.10): core, SQLite and the CLI's tests (an environment
    of its own)."""
    session.run_install(
        "uv",
        "sync",
        "--locked",
        "--all-packages",
        "--all-extras",
        env={"UV_PROJECT_ENVIRONMENT": session.virtualenv.location},
    )
    _pytest(
        session,
        *("core/tests", "plugins/sqlite/tests", "packages/cli/tests"),
        python=str(Path(session.bin, "python")),
    )


@nox.session(venv_backend="none", tags=["ci", "workspace"])
def repo(session: nox.Session) -> None:
    """Repo-level tests: packaging, third-party plugin, CLI end to end."""
    _install(session)
    _pytest(session, "tests", "--ignore=tests/reliability")


@nox.session(venv_backend="none", tags=["ci", "workspace"])
def reliability(session: nox.Session) -> None:
    """No acknowledged record lost or duplicated: many writers on every backend, servers
    restarted and killed, connections cut, HTTP faults (sizes: CHATKEEP_RELIABILITY_SCALE)."""
    _install(session)
    _pytest(session, "tests/reliability")


@nox.session(tags=["ci", "demo"])
def demo(session: nox.Session) -> None:
    """The demo on the embedded SQLite default (or CHATKEEP_URL): installs `chatkeep` as a
    user gets it (the core, SQLite and the CLI), plus the backend another URL needs."""
    args = list(session.posargs)
    url = args[args.index("--url") + 1] if "--url" in args[:-1] else os.environ.get("CHATKEEP_URL")
    extras = [f"--extra={extra}" for extra in _extras_for(url or "")]
    session.run_install(
        "uv", "sync", "--locked", "--no-dev", *extras,
        env={"UV_PROJECT_ENVIRONMENT": session.virtualenv.location},
    )  # fmt: skip
    workdir = ROOT / ".cache" / "demo"
    workdir.mkdir(parents=True, exist_ok=True)
    with session.chdir(workdir):
        session.run(
            "chatkeep",
            "demo",
            *session.posargs,
            env={"CHATKEEP_URL": os.environ.get("CHATKEEP_URL", "")},
        )
    if not url:  # the demo's default store, read from this folder with the session's CLI
        cli = Path(session.virtualenv.location, "bin", "chatkeep")
        shown = cli.relative_to(ROOT) if cli.is_relative_to(ROOT) else cli
        store = (workdir / "chatkeep.db").relative_to(ROOT)
        session.log(f"to look at it again: {shown} sessions list --url sqlite:///{store}")


#: The extra of the meta-distribution that brings the backend of a URL scheme.
DEMO_EXTRAS = {
    "redis": "redis",
    "rediss": "redis",
    "redis+cluster": "redis",
    "postgresql": "postgres",
    "postgres": "postgres",
    "s3": "s3",
    "azblob": "azure-blob",
}


def _extras_for(url: str) -> list[str]:
    """The extras the demo needs for ``url`` (none for SQLite and memory)."""
    scheme = url.split("://", 1)[0].lower()
    if scheme.startswith("encrypted+"):
        return ["encrypted", *_extras_for(url[len("encrypted+") :])]
    return [DEMO_EXTRAS[scheme]] if scheme in DEMO_EXTRAS else []


#: What the bench session installs beside chatkeep: the peer libraries it compares with,
#: and what their rows and the s3 backend need (benchmarks/README.md).
BENCH_PEERS = [
    "openai-agents",
    "langchain-community",
    "langchain-postgres",
    "langchain-redis",
    "agent-framework-core",
    # Only pre-releases exist; older ones fail to import with agent-framework-core 1.23.
    "agent-framework-redis>=1.0.0b261022",
    "aiosqlite",  # the Agents SDK's SQLAlchemy session on SQLite
    "moto[server]",  # --backends s3
    "langgraph-checkpoint-sqlite",  # `-- langgraph`: LangGraph's own savers
    "langgraph-checkpoint-postgres",
    "llama-index-storage-chat-store-redis",  # `-- llama-index`: chatkeep_bench/edit_frameworks.py
    "llama-index-storage-chat-store-postgres",
    "sqlalchemy[asyncio]",  # `-- google-adk`: ADK's DatabaseSessionService, on SQLite and
    "asyncpg",  # PostgreSQL (its documented async driver)
]
BENCH_MEMBERS = [
    *("core", "sqlite", "redis", "postgres", "s3", "azure_blob"),
    *("openai_agents", "langchain", "agent_framework"),  # the framework adapters' rows
    "langgraph",  # `-- langgraph`: chatkeep_bench/langgraph.py
    *("llama_index", "strands"),  # `-- llama-index`, `-- strands`: edit_frameworks.py
    "google_adk",  # `-- google-adk`: chatkeep_bench/google_adk.py
    "pydantic_ai",  # `-- pydantic-ai`: chatkeep_bench/pydantic_ai_store.py
]


@nox.session  # not tagged ci: the full run takes ~10 minutes of the machine
def bench(session: nox.Session) -> None:
    """chatkeep vs the raw drivers vs peer libraries (DESIGN section 8).

    ``nox -s bench`` is the full run (~10 min); arguments after ``--`` go to
    benchmarks/run.py: ``nox -s bench -- --quick --backends sqlite,redis``.
    """
    present = _members()
    editable = [
        arg
        for name in BENCH_MEMBERS
        if name in present
        for arg in ("-e", str(ROOT / present[name]))
    ]
    session.install(*editable, *BENCH_PEERS)
    session.run("python", str(ROOT / "benchmarks" / "run.py"), *session.posargs)


# not tagged ci: the full run takes long (--quick: under 5 minutes)
@nox.session(venv_backend="none", tags=["workspace"])
def scale(session: nox.Session) -> None:
    """Round trips and time at 1k -> 1M records and sessions, cold and warm (issue 15).

    ``nox -s scale -- --quick --backends sqlite,redis``; see benchmarks/README.md.
    """
    _install(session)
    session.run(_bin("python"), str(ROOT / "benchmarks" / "scale.py"), *session.posargs)


@nox.session(venv_backend="none", tags=["workspace"])  # not tagged ci: a measurement
def startup(session: nox.Session) -> None:
    """The CLI's cold-process cost on SQLite, and its slowest imports (issue 15)."""
    _install(session)
    session.run(_bin("python"), str(ROOT / "benchmarks" / "startup.py"), *session.posargs)
