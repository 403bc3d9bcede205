"""``chatkeep sessions``: list, show, fork, undo, delete over a store URL."""

from __future__ import annotations

import json
import re
import uuid

import pytest

from chatkeep.cli.main import main
from chatkeep.core import (
    Agent,
    FunctionCallContent,
    HistoryProvider,
    Message,
    OfflineChatClient,
    encode_records,
    open_store,
    read_view,
)
from chatkeep.core.views import edit_insert, edit_replace


def weather(city: str) -> dict[str, object]:
    """The weather."""
    return {"city": city, "temp": 21}


@pytest.fixture
def url() -> str:
    return f"memory://cli-{uuid.uuid4().hex}"


def converse(url: str, session_id: str, turns: int = 2, tool_call: bool = False) -> None:
    store = open_store(url)
    script = [[FunctionCallContent("call-7", "weather", {"city": "Oslo"})]] if tool_call else []
    agent = Agent(
        OfflineChatClient(script=script), history_provider=HistoryProvider(store), tools=[weather]
    )
    session = agent.create_session(session_id)
    for turn in range(turns):
        agent.run_sync(f"question {turn}", session)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def listed(out: str) -> list[str]:
    """The ids column of a ``sessions list`` table (after its header)."""
    lines = out.splitlines()
    assert lines[0].split() == ["ID", "MESSAGES", "UPDATED", "TITLE"], lines[:1]
    return [line.split()[0] for line in lines[1:]]


def test_list_table_json_lines_prefix_and_limit(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in ("alpha-1", "alpha-2", "beta"):
        converse(url, name, turns=1)
    converse(url, "alpha-2", turns=1)  # two turns: four messages
    code, out, _ = run(capsys, "sessions", "list", "--url", url)
    assert code == 0 and sorted(listed(out)) == ["alpha-1", "alpha-2", "beta"]
    rows = {line.split()[0]: line for line in out.splitlines()[1:]}
    assert rows["alpha-2"].split()[1] == "4" and rows["beta"].split()[1] == "2"
    assert rows["beta"].rstrip().endswith("question 0")  # the title: the first user message
    code, out, _ = run(capsys, "sessions", "list", "--url", url, "--json", "--prefix", "alpha")
    objects = [json.loads(line) for line in out.splitlines()]
    assert sorted(o["id"] for o in objects) == ["alpha-1", "alpha-2"]
    assert {"id", "messages", "created_at", "updated_at", "title"} <= set(objects[0])
    code, out, _ = run(capsys, "sessions", "list", "--url", url, "-n", "2")
    assert code == 0 and len(listed(out)) == 2
    code, out, _ = run(capsys, "sessions", "list", "--url", url, "--limit", "0")
    assert len(listed(out)) == 3  # 0: all
    code, _, err = run(capsys, "sessions", "list", "--url", url, "-n", "-1")
    assert code == 2 and "-1" in err


def test_show_is_a_readable_transcript_with_tool_calls(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    converse(url, "chat", turns=1, tool_call=True)
    code, out, _ = run(capsys, "sessions", "show", "chat", "--url", url)
    assert code == 0
    header, *lines = out.splitlines()
    assert re.fullmatch(r"# chat: 4 messages, created [\d-]+ [\d:]+, updated [\d-]+ [\d:]+", header)
    assert lines[0] == "user      question 0"
    assert lines[1] == 'assistant → call weather({"city": "Oslo"})  [call-7]'
    assert lines[2] == 'tool      ← result [call-7]: {"city": "Oslo", "temp": 21}'
    assert lines[3].startswith("assistant [seen 3]")
    code, out, _ = run(capsys, "sessions", "show", "chat", "--url", url, "--json")
    messages = json.loads(out)
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "assistant"]
    assert messages[1]["contents"][0] == {
        "type": "function_call",
        "call_id": "call-7",
        "name": "weather",
        "arguments": {"city": "Oslo"},
    }
    code, out, _ = run(capsys, "sessions", "show", "chat", "--url", url, "--ids", "--last", "1")
    _header, line = out.splitlines()
    assert line.split()[0] == messages[-1]["message_id"]


def test_fork_and_undo(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    converse(url, "chat", turns=3)
    store = open_store(url)
    second_answer = read_view(store, "chat")[3].message_id
    assert second_answer
    code, out, _ = run(capsys, "sessions", "fork", "chat", "--url", url, "--at", second_answer)
    child = out.strip()
    assert code == 0 and child
    assert len(read_view(store, child)) == 4
    code, out, _ = run(capsys, "sessions", "fork", "chat", "--url", url, "--new-id", "branch")
    assert out.strip() == "branch"
    code, out, _ = run(capsys, "sessions", "undo", "chat", "--url", url, "--turns", "2")
    assert code == 0
    assert out.splitlines()[0].startswith("retracted 4 message(s)")
    assert "question 1" in out and "question 2" in out
    assert len(read_view(store, "chat")) == 2
    assert len(read_view(store, "branch")) == 6  # forked before the undo
    code, out, _ = run(capsys, "sessions", "show", "chat", "--url", url, "--raw")
    assert "(chatkeep.retract)" in out and "(chatkeep.forked)" in out
    assert "question 2" in out  # the audit trail keeps retracted messages
    code, out, _ = run(capsys, "sessions", "show", "chat", "--url", url, "--raw", "--json")
    kinds = [entry["kind"] for entry in json.loads(out)]
    assert kinds.count("message") == 6 and "chatkeep.retract" in kinds
    run(capsys, "sessions", "undo", "chat", "--url", url, "--turns", "5")
    code, out, _ = run(capsys, "sessions", "undo", "chat", "--url", url)
    assert (code, out.strip()) == (0, "nothing to undo")


def test_show_an_edited_conversation(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    """``show`` prints the edited view; ``show --raw`` every record, an in-place edit
    (``chatkeep.splice``) in words with the messages it put in."""
    converse(url, "chat", turns=2)
    store = open_store(url)
    edit_replace(store, "chat", 1, Message.assistant("[redacted]"))
    edit_insert(store, "chat", 2, Message.user("an inserted note"))
    code, out, _ = run(capsys, "sessions", "show", "chat", "--url", url)
    lines = out.splitlines()
    assert code == 0 and lines[0].startswith("# chat: 5 messages")
    assert "[redacted]" in lines[2] and "an inserted note" in lines[3]
    assert "[seen 1]" not in out
    code, out, _ = run(capsys, "sessions", "show", "chat", "--url", url, "--raw")
    assert "(chatkeep.splice) edit before the last 2 message(s): 1 message(s) out, 1 in" in out
    assert "+ assistant [redacted]" in out and "[seen 1]" in out  # the log keeps both


def test_delete_keeps_forks_unless_cascade(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    converse(url, "parent", turns=2)
    store = open_store(url)
    _, out, _ = run(capsys, "sessions", "fork", "parent", "--url", url)
    child = out.strip()
    view = read_view(store, child)
    code, out, _ = run(capsys, "sessions", "delete", "parent", "--url", url)
    assert code == 0 and "kept their history" in out
    assert read_view(store, child) == view
    _, out, _ = run(capsys, "sessions", "fork", child, "--url", url)
    grandchild = out.strip()
    run(capsys, "sessions", "delete", child, "--url", url, "--cascade")
    assert store.read(child) == [] and store.read(grandchild) == []


@pytest.mark.parametrize(
    "argv",
    [
        ["sessions", "show", "missing"],
        ["sessions", "undo", "missing"],
        ["sessions", "fork", "missing"],
        ["sessions", "delete", "missing"],
    ],
)
def test_unknown_sessions_are_one_line_errors(
    url: str, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    code, _, err = run(capsys, *argv, "--url", url)
    assert code == 2
    assert err.strip() == (
        "chatkeep: error: session 'missing' does not exist (it has no records) "
        f"[store: {url} (from --url)]"
    )


def test_fork_at_an_unknown_message_is_an_error(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    converse(url, "chat", turns=1)
    code, _, err = run(capsys, "sessions", "fork", "chat", "--url", url, "--at", "nope")
    assert code == 2 and "message 'nope' is not stored" in err


def test_sessions_follow_chatkeep_url(
    url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    converse(url, "from-env", turns=1)
    monkeypatch.setenv("CHATKEEP_URL", url)
    code, out, _ = run(capsys, "sessions", "list")
    assert code == 0 and listed(out) == ["from-env"]
    code, _, err = run(capsys, "sessions", "show", "nope")
    assert code == 2 and f"[store: {url} (from $CHATKEEP_URL)]" in err


def test_bad_turns_is_a_usage_error(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "sessions", "undo", "x", "--turns", "0", "--url", url)
    assert code == 2 and "must be a positive integer" in err


def test_demo_shows_a_fork_and_an_undo(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "demo", "--url", "memory://")
    assert code == 0
    assert "[seen 7] first: 'Hi! My name is Ada.'" in out
    assert "  fork      > " in out
    assert "[seen 9] first: 'Hi! My name is Ada.'" in out
    assert "  undo      > retracted 2 messages" in out
    assert "which is unchanged." in out
    assert out.rstrip().endswith(
        "memory:// keeps nothing once this process ends: use a file or a server."
    )


def test_a_damaged_session_is_listed_marked_and_the_others_still_show(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from chatkeep.core import Record

    converse(url, "good", turns=1)
    open_store(url).append("bad", [Record("r1", b"not json")])
    code, out, err = run(capsys, "sessions", "list", "--url", url)
    assert code == 1
    rows = {line.split()[0]: line for line in out.splitlines()[1:]}
    # The order is the store's last appends (recent): "bad" was written last, so it is first.
    assert set(rows) == {"good", "bad"} and out.splitlines()[1].startswith("bad ")
    assert rows["bad"].split()[1] == "?" and "damaged: corrupt record in session" in rows["bad"]
    assert err.startswith("chatkeep: warning: corrupt record in session 'bad' at position 0")
    code, out, _ = run(capsys, "sessions", "list", "--url", url, "--json")
    objects = {o["id"]: o for o in map(json.loads, out.splitlines())}
    assert code == 1
    bad = objects["bad"]
    assert (bad["messages"], bad["messages_exact"]) == (0, False)
    assert bad["damaged"].startswith("corrupt record in session 'bad' at position 0")
    assert objects["good"]["messages"] == 2
    assert objects["good"]["messages_exact"] is True and objects["good"]["damaged"] is None


def test_a_long_session_shows_a_lower_bound_without_walking_it_all(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from chatkeep.core import new_id
    from chatkeep.core.metadata import COUNT_WALK

    store = open_store(url)
    total = 2 * COUNT_WALK + 6
    store.append(
        "long", encode_records([Message.user(f"m{n}", message_id=new_id()) for n in range(total)])
    )
    code, out, _ = run(capsys, "sessions", "list", "--url", url)
    assert code == 0
    cells = out.splitlines()[1].split()
    assert cells[0] == "long" and cells[1].endswith("+")
    assert int(cells[1][:-1]) <= COUNT_WALK
    code, out, _ = run(capsys, "sessions", "list", "--url", url, "--json")
    row = json.loads(out)
    assert row["messages_exact"] is False and row["messages"] <= COUNT_WALK
    code, out, _ = run(capsys, "sessions", "show", "long", "--url", url, "--last", "1")
    assert out.startswith(f"# long: {cells[1]} messages,")
    code, out, _ = run(capsys, "sessions", "show", "long", "--url", url)
    assert out.startswith(f"# long: {total} messages,")  # the whole view was read anyway


def test_a_backends_store_not_found_is_the_clis_one_line_store_missing(
    tmp_path: object, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The CLI catches the core's StoreNotFound, not a plugin's class (it has no SQLite
    pre-check of its own): the real backend's DatabaseNotFound (a StoreNotFound) is one
    line naming the URL as given, and no file is created."""
    from pathlib import Path

    from chatkeep.cli import stores

    missing = Path(str(tmp_path)) / "gone.db"
    assert not hasattr(stores, "_sqlite_file")
    code, _, err = run(capsys, "sessions", "list", "--url", f"sqlite:///{missing}")
    assert code == 2
    assert err.startswith("chatkeep: error: no store at sqlite:///") and "does not exist" in err
    assert len(err.strip().splitlines()) == 1
    assert not missing.exists()


def test_an_id_that_starts_with_a_dash_goes_after_double_dash(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    converse(url, "-draft", turns=2)
    code, _out, err = run(capsys, "sessions", "show", "-draft", "--url", url)
    assert code == 2 and "-d" in err  # read as an option without `--`
    code, out, _ = run(capsys, "sessions", "show", "--url", url, "--", "-draft")
    assert code == 0 and "question 1" in out
    code, out, _ = run(capsys, "sessions", "list", "--url", url)
    assert "-draft" in listed(out)
    code, out, _ = run(capsys, "sessions", "undo", "--url", url, "--turns", "1", "--", "-draft")
    assert code == 0 and "question 1" in out
    assert [m.text for m in read_view(open_store(url), "-draft") if m.role == "user"] == [
        "question 0"
    ]
    code, out, _ = run(capsys, "sessions", "fork", "--url", url, "--", "-draft")
    assert code == 0
    code, _, _ = run(capsys, "sessions", "delete", "--url", url, "--cascade", "--", "-draft")
    assert code == 0 and read_view(open_store(url), "-draft") == []
    converse(url, "-opt", turns=1)
    code, out, _ = run(capsys, "export", "--url", url, "--session", "-opt")
    assert code == 0 and '"session":"-opt"' in out.replace(" ", "")


def test_an_encrypted_sqlite_store_is_opened_read_only_through_the_wrapper(
    tmp_path: object, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from pathlib import Path

    from chatkeep.cli import stores
    from chatkeep.core import ReadOnlyStore
    from chatkeep.encrypted import Keyring

    monkeypatch.setenv("CHATKEEP_ENCRYPTION_KEYS", "k1:" + Keyring.generate_key())
    db = Path(str(tmp_path)) / "secret.db"
    url = f"encrypted+sqlite:///{db}"
    converse(url, "locked", turns=2)
    code, out, _ = run(capsys, "sessions", "list", "--url", url)
    assert code == 0 and listed(out) == ["locked"] and "4" in out.split()
    code, out, _ = run(capsys, "sessions", "show", "locked", "--url", url)
    assert code == 0 and "question 1" in out
    code, out, _ = run(capsys, "export", url)
    assert code == 0 and '"locked"' in out
    # The handle the read-only commands use is read-only inside the wrapper too.
    choice = stores.StoreChoice(url, "--url")
    with stores.open_store_for(choice, read_only=True) as store, pytest.raises(ReadOnlyStore):
        store.append("locked", encode_records([Message.user("no", message_id="m-no")]))
    # A missing file: one line naming the URL as given, and nothing created.
    missing = Path(str(tmp_path)) / "missing.db"
    code, _, err = run(capsys, "sessions", "list", "--url", f"encrypted+sqlite:///{missing}")
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert err.startswith(
        f"chatkeep: error: no store at encrypted+sqlite:///{missing} (from --url)"
    )
    assert "mode=ro" not in err.split(":", 3)[2] and not missing.exists()
