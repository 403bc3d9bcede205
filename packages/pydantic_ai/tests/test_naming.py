"""``chatkeep/pydantic_ai`` never hides Pydantic AI: with a ``chatkeep`` folder on
``sys.path`` (pytest's default import mode does that for tests inside it) ``pydantic_ai``
still imports, and importing the adapter under the wrong name says what is wrong."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import chatkeep.pydantic_ai

FOLDER = Path(chatkeep.pydantic_ai.__file__).resolve().parents[1]  # .../src/chatkeep


def run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", f"import sys; sys.path.insert(0, {str(FOLDER)!r}); {code}"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_adapter_under_the_wrong_name_explains() -> None:
    done = run("import pydantic_ai")
    assert done.returncode != 0
    assert "ImportError" in done.stderr
    assert "hides Pydantic AI's" in done.stderr


def test_with_the_folder_after_site_packages_both_import() -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            f"import sys; sys.path.append({str(FOLDER)!r}); import pydantic_ai.conversation_store; "
            "from chatkeep.pydantic_ai import ChatkeepConversationStore; print('ok')",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
