"""chatkeep.core.transfer on real backends: migrate between every ordered pair of the
in-repo backends (memory, SQLite, Redis, PostgreSQL, S3 on moto, Azure Blob on Azurite),
hostile session ids through export, import and migrate, a migration killed with SIGKILL
and run again, and the Python blocks of core/README.md's transfer section run as written.

Servers come from :mod:`chatkeep.testing.servers` (a missing one skips, or fails under
``CI=true``); each store here gets a URL of its own (a file, namespace or prefix), and what
the servers keep is removed at the end.
"""

from __future__ import annotations

import io
import os
import re
import signal
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

from chatkeep.core import (
    Record,
    Store,
    TransferStats,
    export_jsonl,
    import_jsonl,
    migrate,
    open_store,
    read_view,
    verify,
)
from chatkeep.core import transfer as transfer_module
from chatkeep.core.metadata import list_session_infos
from chatkeep.testing.samples import (
    BINARY_PAYLOADS,
    HOSTILE_ID_FRAGMENTS,
    HOSTILE_RECORD_IDS,
    fill_controlled_conversation,
)
from chatkeep.testing.servers import (  # noqa: F401  (fixtures)
    azure_url,
    fresh_store_url,
    postgres_url,
    redis_url,
    s3_url,
)

REPO = Path(__file__).resolve().parents[1]
BACKENDS = ["memory", "sqlite", "redis", "postgres", "s3", "azure_blob"]
PAIRS = [(a, b) for a in BACKENDS for b in BACKENDS if a != b]
#: Small pages, so every session below spans several.
PAGE = 4

Opener = Callable[[str], Store]


def fresh_url(backend: str, request: pytest.FixtureRequest, directory: Path) -> str:
    """A URL of a store of its own on ``backend`` (empty; inside the run's schema,
    namespace, bucket or container)."""
    return fresh_store_url(backend, request, directory, name="transfer")


@pytest.fixture(scope="module")
def opener(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Callable[[str], Store]]:
    """``opener(backend)``: a new empty store on ``backend``, erased and closed at the end
    of the module (the server helpers drop the schema and the Redis keys as well)."""
    directory = tmp_path_factory.mktemp("transfer")
    opened: list[Store] = []

    def open_fresh(backend: str) -> Store:
        store = open_store(fresh_url(backend, request, directory))
        opened.append(store)
        return store

    yield open_fresh
    for store in opened:
        try:
            for session_id in list(store.list_sessions()):
                store.delete(session_id)
        finally:
            store.close()


def everything(store: Store) -> dict[str, list[Record]]:
    return {session_id: store.read(session_id) for session_id in sorted(store.list_sessions())}


def fill(store: Store) -> None:
    """Binary records, a session of several pages, and a conversation with a fork, an undo
    and a checkpoint (so every kind of control record is in the logs)."""
    store.append("binary", [Record(f"b{i}", data) for i, data in enumerate(BINARY_PAYLOADS)])
    store.append("long", [Record(f"r{i:02}", b"%d" % i) for i in range(11)])
    fill_controlled_conversation(store, ["Hi, I'm Ada.", "Plan a trip to Oslo."])


@pytest.fixture(scope="module")
def sources(opener: Opener) -> Callable[[str], Store]:
    """``sources(backend)``: that backend's filled store (filled once per module)."""
    filled: dict[str, Store] = {}

    def source(backend: str) -> Store:
        if backend not in filled:
            store = opener(backend)
            fill(store)
            filled[backend] = store
        return filled[backend]

    return source


@pytest.fixture
def small_pages(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(transfer_module, "PAGE_RECORDS", PAGE)


@pytest.mark.usefixtures("small_pages")
@pytest.mark.parametrize(("source_backend", "destination_backend"), PAIRS)
def test_migrate_between_every_pair_of_backends(
    source_backend: str,
    destination_backend: str,
    sources: Callable[[str], Store],
    opener: Opener,
) -> None:
    source = sources(source_backend)
    destination = opener(destination_backend)
    stats = migrate(source, destination)  # verifies, or raises VerificationFailed
    original = everything(source)
    assert everything(destination) == original
    records = sum(len(log) for log in original.values())
    assert stats.sessions == len(original) == 4 and stats.records_copied == records
    kinds = {r.data[:30] for r in destination.read("chat") + destination.read("branch")}
    assert any(b"chatkeep.checkpoint" in k for k in kinds)
    for session_id in ("chat", "branch"):
        assert read_view(destination, session_id) == read_view(source, session_id)
    assert migrate(source, destination) == TransferStats(len(original), 0, records, 0)
    assert verify(source, destination) == []


def test_a_fork_migrated_alone_brings_its_parent_and_lists_on_the_destination(
    sources: Callable[[str], Store], opener: Opener
) -> None:
    source = sources("sqlite")
    destination = opener("postgres")
    stats = migrate(source, destination, sessions=["branch"])
    assert sorted(destination.list_sessions()) == ["branch", "chat"]
    assert stats.sessions == 2
    assert stats.records_copied == len(source.read("chat")) + len(source.read("branch"))
    assert read_view(destination, "branch") == read_view(source, "branch")
    listed = {info.id: info.messages for info in list_session_infos(destination)}
    assert listed == {"chat": len(read_view(source, "chat")), "branch": 5}


HOSTILE_SESSIONS = sorted(set(HOSTILE_ID_FRAGMENTS))


@pytest.mark.slow  # about 100 sessions through every backend
def test_hostile_ids_through_export_import_and_migrate(opener: Opener) -> None:
    origin = opener("memory")
    for index, session_id in enumerate(HOSTILE_SESSIONS):
        origin.append(session_id, [Record(f"r{index}", session_id.encode() + b"\x00\xff")])
    origin.append("records", [Record(rid, rid.encode()) for rid in HOSTILE_RECORD_IDS])
    expected = everything(origin)
    assert len(expected) == len(HOSTILE_SESSIONS) + 1
    previous = origin
    for backend in ["sqlite", "redis", "postgres", "s3", "azure_blob"]:
        store = opener(backend)
        migrate(previous, store)
        assert everything(store) == expected, backend
        previous = store
    out = io.StringIO()
    export_jsonl(previous, out)
    for backend in ["memory", "sqlite"]:
        imported = opener(backend)
        import_jsonl(imported, io.StringIO(out.getvalue()))
        assert everything(imported) == expected
        again = import_jsonl(imported, io.StringIO(out.getvalue()))
        assert again.records_copied == 0 and everything(imported) == expected


def test_export_import_round_trip_is_byte_exact_on_a_server_backend(
    sources: Callable[[str], Store], opener: Opener
) -> None:
    source = sources("postgres")
    out = io.StringIO()
    exported = export_jsonl(source, out)
    destination = opener("redis")
    imported = import_jsonl(destination, io.StringIO(out.getvalue()))
    assert everything(destination) == everything(source)
    assert (imported.records_copied, imported.bytes) == (exported.records_copied, exported.bytes)
    assert verify(source, destination) == []


def test_encrypted_stores_reencrypt_and_their_inner_stores_copy_ciphertext(
    tmp_path: Path,
) -> None:
    from chatkeep.encrypted import Keyring

    keys = {"k1": Keyring.generate_key()}
    other_keys = {"k2": Keyring.generate_key()}
    plain = {"s": [Record("a", b"secret one"), Record("b", bytes(range(256)))]}
    a, b, c = (f"sqlite:///{tmp_path / name}" for name in ("a.db", "b.db", "c.db"))
    with open_store(f"encrypted+{a}", keys=keys) as sealed:
        sealed.append("s", plain["s"])
    with open_store(a) as raw_a, open_store(b) as raw_b:  # the ciphertext, as it is
        migrate(raw_a, raw_b)
        assert everything(raw_b) == everything(raw_a) != plain
    with open_store(f"encrypted+{b}", keys=keys) as copy:
        assert everything(copy) == plain  # still opens with the same key
    with (
        open_store(f"encrypted+{a}", keys=keys) as source,
        open_store(f"encrypted+{c}", keys=other_keys) as destination,
    ):
        migrate(source, destination)  # plaintext through both keys: re-encrypted
        assert everything(destination) == plain
    with open_store(c) as raw_c, open_store(a) as raw_a:
        assert everything(raw_c) != everything(raw_a)


def test_no_password_in_an_export_or_in_progress(request: pytest.FixtureRequest) -> None:
    # The CI machine's PostgreSQL trusts local connections, so a password is ignored there;
    # a configured URL that has one already keeps it, and that one is looked for.
    parts = urlsplit(request.getfixturevalue("postgres_url"))
    secret = parts.password or "hunter2-pw"
    if parts.password is None:
        user = parts.username or "postgres"
        parts = parts._replace(netloc=f"{user}:{secret}@{parts.hostname}:{parts.port or 5432}")
    with open_store(urlunsplit(parts)) as store:
        store.append("s", [Record("a", b"1")])
        out = io.StringIO()
        seen: list[object] = []
        export_jsonl(store, out, progress=seen.append)
        assert secret not in out.getvalue() and secret not in repr(seen)
        store.delete("s")


# -- a migration killed part way and run again -----------------------------------------------

KILLER = textwrap.dedent(
    """
    import os, signal, sys
    from chatkeep.core import open_store, transfer

    transfer.PAGE_RECORDS = 5
    source, destination, after = sys.argv[1], sys.argv[2], int(sys.argv[3])

    def progress(state):
        if state.records_done >= after:
            os.kill(os.getpid(), signal.SIGKILL)

    transfer.migrate(open_store(source), open_store(destination), progress=progress)
    print("not killed")
    """
)


@pytest.mark.slow  # a child process each
@pytest.mark.parametrize("destination_backend", ["sqlite", "postgres", "redis"])
def test_a_migration_killed_midway_completes_when_run_again(
    destination_backend: str,
    request: pytest.FixtureRequest,
    tmp_path: Path,
) -> None:
    source_url = f"sqlite:///{tmp_path / 'source.db'}"
    destination_url = fresh_url(destination_backend, request, tmp_path)
    with open_store(source_url) as source:
        for s in range(3):
            source.append(f"s{s}", [Record(f"r{i:02}", b"%d-%d" % (s, i)) for i in range(20)])
        original = everything(source)
    killed = subprocess.run(
        [sys.executable, "-c", KILLER, source_url, destination_url, "27"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    with open_store(source_url) as source, open_store(destination_url) as destination:
        try:
            partial = everything(destination)
            done = sum(len(log) for log in partial.values())
            assert 27 <= done < 60  # killed after 27 records (pages of 5), before the end
            for session_id, log in partial.items():  # what is there is a prefix of each
                assert log == original[session_id][: len(log)]
            stats = migrate(source, destination)  # verifies
            assert (stats.records_copied, stats.records_skipped) == (60 - done, done)
            assert everything(destination) == original  # no duplicates, nothing missing
        finally:
            for session_id in list(destination.list_sessions()):
                destination.delete(session_id)


# -- the README's examples run as written ------------------------------------------------------


def readme_blocks() -> list[str]:
    text = (REPO / "core" / "README.md").read_text(encoding="utf-8")
    section = text.split("\n## Export, import and migrate\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, flags=re.DOTALL)


def test_the_readme_section_has_python_examples() -> None:
    assert len(readme_blocks()) >= 2


@pytest.mark.parametrize("index", range(len(readme_blocks())))
def test_the_readme_examples_run_as_written(index: int, tmp_path: Path) -> None:
    script = tmp_path / "example.py"
    script.write_text(readme_blocks()[index], encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHATKEEP_")}
    result = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
def test_the_async_twins_stream_like_the_sync_calls(backend: str, opener: Opener) -> None:
    import asyncio
    import json

    from chatkeep.core.transfer import (
        TransferProgress,
        VerificationFailed,
        aexport_jsonl,
        aimport_jsonl,
        amigrate,
        averify,
        export_jsonl,
    )

    source = opener(backend)
    fill(source)
    total = sum(len(records) for records in everything(source).values())
    seen: list[TransferProgress] = []

    def body(text: str) -> list[str]:
        return text.splitlines()[1:]  # after the header (its creation time differs)

    async def go() -> None:
        out = io.StringIO()
        stats = await aexport_jsonl(source, out, progress=seen.append)
        sync = io.StringIO()
        export_jsonl(source, sync)
        assert body(out.getvalue()) == body(sync.getvalue())
        assert json.loads(out.getvalue().splitlines()[0])["chatkeep"] == "export"
        assert stats.records_copied == total
        imported = opener(backend)
        again = await aimport_jsonl(imported, io.StringIO(out.getvalue()))
        assert again.records_copied == total and everything(imported) == everything(source)
        migrated = opener(backend)
        moved = await amigrate(source, migrated)
        assert moved.records_copied == total and everything(migrated) == everything(source)
        assert await averify(source, migrated) == []
        migrated.append("long", [Record("extra", b"!")])
        assert [m.session_id for m in await averify(source, migrated)] == ["long"]
        with pytest.raises(VerificationFailed):
            await amigrate(source, migrated)

    asyncio.run(go())
    assert seen and seen[-1].records_done == total
