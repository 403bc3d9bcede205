"""``chatkeep.openai_agents`` never hides the SDK's ``agents`` package, even with its
``chatkeep`` folder on ``sys.path`` (pytest's default import mode does that)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import chatkeep.openai_agents

FOLDER = Path(chatkeep.openai_agents.__file__).resolve().parents[1]  # .../src/chatkeep


def test_the_sdk_and_the_adapter_import_with_the_folder_on_sys_path() -> None:
    code = (
        f"import sys; sys.path.insert(0, {str(FOLDER)!r}); "
        "import agents; from agents import Runner, SQLiteSession; "
        "from chatkeep.openai_agents import ChatkeepSession; "
        "print(agents.__file__)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert str(FOLDER) not in done.stdout  # the SDK's agents, not something of ours
