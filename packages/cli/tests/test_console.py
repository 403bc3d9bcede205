"""The installed ``chatkeep`` console script in real subprocesses: what a user sees for a
missing store, a read-only or foreign SQLite file, a closed pipe, Ctrl-C, bad URLs,
``--version``, ``--json``, and export / import / migrate with hostile session ids."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

from chatkeep.core import (
    Agent,
    DataContent,
    HistoryProvider,
    Message,
    OfflineChatClient,
    Record,
    TextContent,
    encode_records,
    open_store,
    read_view,
)
from chatkeep.core.views import fork
from chatkeep.testing.samples import HOSTILE_ID_FRAGMENTS
from chatkeep.testing.servers import postgres_store_url

CHATKEEP = Path(sys.executable).with_name("chatkeep")


def env_without_store(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHATKEEP_")}
    env.update(extra)
    return env


def chatkeep(
    *args: str,
    cwd: Path,
    env: dict[str, str] | None = None,
    stdin: str | None = None,
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(CHATKEEP), *args],
        cwd=cwd,
        env=env_without_store() if env is None else env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


def one_line_error(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("chatkeep: error: "), result.stderr
    return lines[0]


@pytest.fixture
def filled(tmp_path: Path) -> Iterator[str]:
    """A SQLite store with two conversations (one of three turns) and a fork."""
    url = f"sqlite:///{tmp_path / 'chats.db'}"
    with open_store(url) as store:
        agent = Agent(OfflineChatClient(), history_provider=HistoryProvider(store))
        for session_id, turns in (("trip", 3), ("work", 1)):
            session = agent.create_session(session_id)
            for turn in range(turns):
                agent.run_sync(f"{session_id} question {turn}", session)
        fork(store, "trip", new_session_id="trip-fork")
    yield url


def test_the_console_script_is_installed() -> None:
    assert CHATKEEP.exists(), f"no console script at {CHATKEEP}"


def test_version(tmp_path: Path) -> None:
    from importlib.metadata import version

    result = chatkeep("--version", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"chatkeep {version('chatkeep-cli')} (")


@pytest.mark.parametrize("command", [["sessions", "list"], ["sessions", "show", "x"], ["export"]])
def test_a_missing_store_is_one_line_naming_it_and_its_source(
    command: list[str], tmp_path: Path
) -> None:
    line = one_line_error(chatkeep(*command, cwd=tmp_path))
    assert (
        "no store at sqlite:///chatkeep.db (from the default; set --url or $CHATKEEP_URL)" in line
    )
    assert str(tmp_path / "chatkeep.db") in line
    env = env_without_store(CHATKEEP_URL="sqlite:///elsewhere.db")
    line = one_line_error(chatkeep(*command, cwd=tmp_path, env=env))
    assert "no store at sqlite:///elsewhere.db (from $CHATKEEP_URL)" in line
    line = one_line_error(chatkeep(*command, "--url", "sqlite:///third.db", cwd=tmp_path))
    assert "no store at sqlite:///third.db (from " in line
    assert list(tmp_path.iterdir()) == []  # nothing was created


def test_a_missing_session_names_the_store(filled: str, tmp_path: Path) -> None:
    line = one_line_error(chatkeep("sessions", "show", "nope", "--url", filled, cwd=tmp_path))
    assert (
        f"session 'nope' does not exist (it has no records) [store: {filled} (from --url)]" in line
    )


def _snapshot(folder: Path) -> dict[str, bytes | None]:
    """The SQLite files in ``folder``: the database and a non-empty WAL by content. The
    shared-memory index and an empty WAL are left out: a read-only reader of a WAL database
    may leave both behind (it keeps its read marks in the index and cannot remove either;
    plugins/sqlite/README.md says so), and neither holds data."""
    return {
        p.name: p.read_bytes()
        for p in sorted(folder.glob("*.db*"))
        if not p.name.endswith("-shm") and not (p.name.endswith("-wal") and p.stat().st_size == 0)
    }


def test_list_and_show_and_export_never_write(filled: str, tmp_path: Path) -> None:
    before = _snapshot(tmp_path)
    listing = chatkeep("sessions", "list", "--url", filled, cwd=tmp_path)
    assert listing.returncode == 0, listing.stderr
    lines = listing.stdout.splitlines()
    assert lines[0].split() == ["ID", "MESSAGES", "UPDATED", "TITLE"]
    rows = {line.split()[0]: line.split() for line in lines[1:]}
    assert set(rows) == {"trip", "work", "trip-fork"} and rows["trip"][1] == "6"
    assert chatkeep("sessions", "show", "trip", "--url", filled, cwd=tmp_path).returncode == 0
    assert chatkeep("export", filled, cwd=tmp_path).returncode == 0
    assert _snapshot(tmp_path) == before


def test_a_sqlite_file_of_another_application_is_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "notes.db"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")
        db.execute("INSERT INTO notes (body) VALUES ('hello')")
    result = chatkeep("sessions", "list", "--url", f"sqlite:///{path}", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["ID  MESSAGES  UPDATED  TITLE"]
    with sqlite3.connect(path) as db:
        tables = sorted(row[0] for row in db.execute("SELECT name FROM sqlite_master"))
    assert tables == ["notes"]  # no chatkeep_* tables were added


def test_a_file_the_user_cannot_write_can_be_listed_and_shown(filled: str, tmp_path: Path) -> None:
    # (Root writes through mode bits; then what holds is that nothing was written.)
    folder = Path(tempfile.mkdtemp(prefix="chatkeep-ro-")) / "ro"
    folder.parent.chmod(0o755)
    folder.mkdir()
    src = Path(filled.removeprefix("sqlite:///"))
    with open_store(filled) as store:  # fold the WAL into the file before copying it
        store.read("trip")
    with sqlite3.connect(src) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    target = folder / "chats.db"
    target.write_bytes(src.read_bytes())
    target.chmod(0o444)
    folder.chmod(0o555)
    url = f"sqlite:///{target}"
    try:
        _list_and_show_read_only(url, folder)
    finally:
        folder.chmod(0o755)
        shutil.rmtree(folder.parent)


def _list_and_show_read_only(url: str, folder: Path) -> None:
    target = folder / "chats.db"
    original = target.read_bytes()
    listing = chatkeep("sessions", "list", "--url", url, cwd=folder)
    assert listing.returncode == 0, listing.stderr
    assert {line.split()[0] for line in listing.stdout.splitlines()[1:]} == {
        "trip",
        "work",
        "trip-fork",
    }
    shown = chatkeep("sessions", "show", "work", "--url", url, cwd=folder)
    assert shown.returncode == 0, shown.stderr
    assert "user      work question 0" in shown.stdout
    # Nothing of the database changed. (Root may create SQLite's empty WAL index files in a
    # folder whose mode bits say read-only; any other user cannot.)
    assert target.read_bytes() == original
    extra = {p.name for p in folder.iterdir()} - {"chats.db"}
    assert extra <= {"chats.db-wal", "chats.db-shm"}
    assert not (folder / "chats.db-wal").exists() or (folder / "chats.db-wal").stat().st_size == 0


def test_a_closed_pipe_is_quiet(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'many.db'}?synchronous=off"
    with open_store(url) as store:
        for n in range(3000):
            store.append(f"session-{n:05d}", [Record("r", b'{"type":"message","role":"user"}')])
    for command in (["sessions", "list", "-n", "0", "--url", url], ["export", url]):
        process = subprocess.Popen(
            [str(CHATKEEP), *command],
            cwd=tmp_path,
            env=env_without_store(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )  # as `chatkeep ... | head -1`
        assert process.stdout is not None and process.stderr is not None
        first = process.stdout.readline()
        process.stdout.close()
        err = process.stderr.read().decode()
        code = process.wait(timeout=120)
        assert first, err
        assert (code, err) == (141, ""), command


def test_ctrl_c_in_the_demo_is_exit_130_without_a_traceback(tmp_path: Path) -> None:
    process = subprocess.Popen(
        [str(CHATKEEP), "demo"],
        cwd=tmp_path,
        env=env_without_store(PYTHONUNBUFFERED="1"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group, as a terminal's foreground job
    )
    assert process.stdout is not None and process.stderr is not None
    for line in process.stdout:
        if "second process" in line:
            break
    time.sleep(0.2)
    os.killpg(process.pid, signal.SIGINT)  # what Ctrl-C does: the whole group
    out, err = process.communicate(timeout=60)
    assert process.returncode == 130, (out, err)
    assert "Traceback" not in err and "KeyboardInterrupt" not in err


def test_bad_urls_through_the_console_script(tmp_path: Path) -> None:
    line = one_line_error(chatkeep("sessions", "list", "--url", "chats.db", cwd=tmp_path))
    assert "did you mean 'sqlite:///chats.db'?" in line
    line = one_line_error(chatkeep("demo", "--url", "sqlit:///c.db", cwd=tmp_path))
    assert "did you mean 'sqlite:///c.db'?" in line and "pip install" not in line
    assert list(tmp_path.iterdir()) == []


def test_demo_stores_where_sessions_list_looks_and_says_how_to_see_it(tmp_path: Path) -> None:
    demo = chatkeep("demo", cwd=tmp_path)
    assert demo.returncode == 0, demo.stderr
    assert (tmp_path / "chatkeep.db").exists()
    last = demo.stdout.strip().splitlines()[-1].strip()
    assert last.startswith("chatkeep sessions show ")
    shown = chatkeep(*last.split()[1:], cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert "Hi! My name is Ada." in shown.stdout
    listing = chatkeep("sessions", "list", cwd=tmp_path)
    assert last.split()[-1] in listing.stdout


def test_conformance_json_through_the_console_script(tmp_path: Path) -> None:
    result = chatkeep("conformance", "memory://", "--json", "--", "-k", "Slice", cwd=tmp_path)
    report = json.loads(result.stdout[result.stdout.index("{") :])
    assert report["backend"] == "memory" and report["counts"]["failed"] == 0
    assert result.returncode == 1  # narrowed: partial, never full
    usage = chatkeep("conformance", "memory://", "--jsn", cwd=tmp_path)
    assert usage.returncode == 2 and "No such option" in usage.stderr and usage.stdout == ""


def _hostile_store(url: str) -> dict[str, list[Record]]:
    """A session per hostile id fragment, each holding one message with binary data."""
    written = {}
    with open_store(url) as store:
        for n, fragment in enumerate(HOSTILE_ID_FRAGMENTS):
            session_id = f"h{n}-{fragment}"
            message = Message(
                "user",
                [TextContent(f"hello {fragment}"), DataContent(bytes([n % 256, 0, 255]), "x/y")],
                message_id=f"m{n}-{fragment}",
            )
            records = encode_records([message])
            store.append(session_id, records)
            written[session_id] = records
    return written


def test_export_import_migrate_with_hostile_ids(tmp_path: Path) -> None:
    source = f"sqlite:///{tmp_path / 'source.db'}"
    written = _hostile_store(source)
    exported = chatkeep("export", source, cwd=tmp_path)
    assert exported.returncode == 0, exported.stderr
    lines = [json.loads(line) for line in exported.stdout.splitlines()]
    assert lines[0]["chatkeep"] == "export"
    assert {line["session"] for line in lines if "session" in line} == set(written)
    target = f"sqlite:///{tmp_path / 'imported.db'}"
    imported = chatkeep("import", target, stdin=exported.stdout, cwd=tmp_path)
    assert imported.returncode == 0, imported.stderr
    assert f"imported {len(written)} session(s), {len(written)} record(s)" in imported.stderr
    again = chatkeep("import", target, stdin=exported.stdout, cwd=tmp_path)
    assert f"0 record(s), 0 bytes, {len(written)} already there" in again.stderr
    migrated_url = f"sqlite:///{tmp_path / 'migrated.db'}"
    migrated = chatkeep("migrate", source, migrated_url, cwd=tmp_path)
    assert migrated.returncode == 0, migrated.stderr
    assert "and verified" in migrated.stderr
    for url in (target, migrated_url):
        with open_store(url) as store:
            for session_id, records in written.items():
                assert store.read(session_id) == records, session_id
    listed = chatkeep("sessions", "list", "-n", "0", "--json", "--url", target, cwd=tmp_path)
    assert {json.loads(line)["id"] for line in listed.stdout.splitlines()} == set(written)
    one = next(s for s in written if s.startswith("h0-"))
    exported_one = chatkeep("export", source, "--session", one, cwd=tmp_path)
    objects = [json.loads(line) for line in exported_one.stdout.splitlines()]
    assert {o.get("session") for o in objects} - {None} == {one}
    record = next(o for o in objects if "session" in o)
    compact = json.dumps(record["json"], ensure_ascii=False, separators=(",", ":"))
    assert compact.encode("utf-8") == written[one][0].data  # a message is JSON, greppable


def test_export_to_a_file_and_import_from_one(filled: str, tmp_path: Path) -> None:
    out = tmp_path / "backup.jsonl"
    assert chatkeep("export", filled, "-o", str(out), cwd=tmp_path).returncode == 0
    target = f"sqlite:///{tmp_path / 'copy.db'}"
    done = chatkeep("import", target, "-i", str(out), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    with open_store(filled) as a, open_store(target) as b:
        assert read_view(a, "trip-fork") == read_view(b, "trip-fork")


def test_import_of_something_else_is_one_line(tmp_path: Path) -> None:
    target = f"sqlite:///{tmp_path / 'copy.db'}"
    line = one_line_error(chatkeep("import", target, stdin="not json\n", cwd=tmp_path))
    assert "line 1" in line and "copy.db" in line


def test_migrate_names_a_missing_source(tmp_path: Path) -> None:
    line = one_line_error(
        chatkeep("migrate", "sqlite:///nothing.db", "sqlite:///b.db", cwd=tmp_path)
    )
    assert "no store at sqlite:///nothing.db (from the SOURCE argument)" in line
    assert list(tmp_path.iterdir()) == []


LOSSY_BACKEND = Path(__file__).resolve().parent / "lossy_backend"


def lossy_env(tmp_path: Path) -> dict[str, str]:
    """An environment whose ``chatkeep`` finds the ``lossy://`` test backend: its module
    and a dist-info directory with its entry point, on ``PYTHONPATH`` (no install)."""
    site = tmp_path / "site"
    info = site / "lossy_store-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: lossy-store\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[chatkeep]\nlossy = lossy_store\n")
    shutil.copy(LOSSY_BACKEND / "lossy_store.py", site / "lossy_store.py")
    return env_without_store(PYTHONPATH=str(site))


def test_migrate_exits_1_naming_the_sessions_that_differ_and_no_secret(
    tmp_path: Path,
) -> None:
    source = f"sqlite:///{tmp_path / 'chats.db'}"
    store = open_store(source)
    for session_id in ("damaged-a", "intact", "damaged-b"):
        messages = [Message.user(f"hello from {session_id}", message_id=f"{session_id}-1")]
        store.append(session_id, encode_records(messages))
    store.close()
    secret = "pw-9f3c1e7a"
    result = chatkeep(
        "migrate",
        source,
        f"lossy://ada:{secret}@vault.example/main",
        cwd=tmp_path,
        env=lossy_env(tmp_path),
    )
    assert result.returncode == 1, result.stderr
    assert "damaged-a" in result.stderr and "damaged-b" in result.stderr
    assert "intact" not in result.stderr.replace("sqlite:///", "")
    assert "2 sessions differ between the source and the destination" in result.stderr
    assert "Traceback" not in result.stderr
    assert secret not in result.stdout + result.stderr
    # The same migration into an honest store passes: the exit 1 came from the damage.
    clean = chatkeep("migrate", source, f"sqlite:///{tmp_path / 'copy.db'}", cwd=tmp_path)
    assert clean.returncode == 0, clean.stderr


@pytest.fixture
def postgres_url() -> Iterator[str]:
    """A schema of its own on the real PostgreSQL (dropped afterwards)."""
    with ExitStack() as cleanup:
        yield postgres_store_url(cleanup)


def _schema_exists(url: str) -> bool:
    import psycopg

    server, _, query = url.partition("?")
    schema = dict(piece.split("=", 1) for piece in query.split("&"))["schema"]
    with psycopg.connect(server) as conn:
        found = conn.execute(
            "SELECT 1 FROM information_schema.schemata WHERE schema_name = %s", (schema,)
        ).fetchone()
    return found is not None


def test_postgres_read_commands_create_nothing_then_migrate_into_it(
    postgres_url: str, filled: str, tmp_path: Path
) -> None:
    listing = chatkeep("sessions", "list", "--url", postgres_url, cwd=tmp_path)
    assert listing.returncode == 0, listing.stderr
    assert listing.stdout.splitlines() == ["ID  MESSAGES  UPDATED  TITLE"]
    assert chatkeep("export", postgres_url, cwd=tmp_path).returncode == 0
    assert not _schema_exists(postgres_url)  # mode=ro: no schema, no tables
    migrated = chatkeep("migrate", filled, postgres_url, cwd=tmp_path)
    assert migrated.returncode == 0, migrated.stderr
    assert "copied 3 session(s)" in migrated.stderr and "and verified" in migrated.stderr
    listing = chatkeep("sessions", "list", "--url", postgres_url, "--quiet", cwd=tmp_path)
    assert sorted(listing.stdout.split()) == ["trip", "trip-fork", "work"]
    shown = chatkeep("sessions", "show", "trip-fork", "--url", postgres_url, cwd=tmp_path)
    assert "user      trip question 2" in shown.stdout
