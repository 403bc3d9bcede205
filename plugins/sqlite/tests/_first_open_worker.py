"""Run by test_concurrency in fresh (spawned) processes; not a test module.

Expects the globals DB_PATH, WORKER and BARRIER (set through runpy.run_path's init_globals).
"""

from chatkeep.core import Record
from chatkeep.sqlite import SQLiteStore

BARRIER.wait(30)  # type: ignore[name-defined]  # noqa: F821 - every process opens at once
store = SQLiteStore(DB_PATH, timeout=30)  # type: ignore[name-defined]  # noqa: F821
for batch in range(10):
    store.append(
        "shared",
        [Record(f"{WORKER}-{batch}-{i}", f"{WORKER}".encode()) for i in range(3)],  # type: ignore[name-defined]  # noqa: F821
    )
    store.append(f"own-{WORKER}", [Record(str(batch), b"x")])  # type: ignore[name-defined]  # noqa: F821
store.close()
