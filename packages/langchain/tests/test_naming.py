"""``chatkeep/langchain`` never hides LangChain: with a ``chatkeep`` folder on ``sys.path``
(pytest's default import mode does that for tests inside it) ``langchain_core`` still
imports, and importing the adapter under the wrong name says what is wrong."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import chatkeep.langchain

FOLDER = Path(chatkeep.langchain.__file__).resolve().parents[1]  # .../src/chatkeep


def run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", f"import sys; sys.path.insert(0, {str(FOLDER)!r}); {code}"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_langchain_core_and_the_adapter_import_with_the_folder_on_sys_path() -> None:
    done = run(
        "import langchain_core.chat_history, langchain_core.runnables.history; "
        "from chatkeep.langchain import ChatkeepChatMessageHistory; print('ok')"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_the_adapter_under_the_wrong_name_explains() -> None:
    done = run("import langchain")
    assert done.returncode != 0
    assert "ImportError" in done.stderr
    assert "hides LangChain's" in done.stderr
