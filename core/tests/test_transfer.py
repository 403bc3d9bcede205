"""chatkeep.core.transfer on the memory backend: the export format, import's checks and
idempotency, migrate's resume and verification, paging (real backends:
tests/test_transfer_backends.py at the repository root)."""

from __future__ import annotations

import base64
import io
import json
import os
import tracemalloc
from collections.abc import Callable, Iterator
from typing import Any, ClassVar

import pytest

from chatkeep.core import (
    FORMAT_VERSION,
    ChatkeepError,
    InvalidExport,
    Message,
    Record,
    RecordConflict,
    SessionMismatch,
    SessionNotFound,
    Store,
    StoreUnavailable,
    TransferProgress,
    TransferStats,
    VerificationFailed,
    encode_records,
    export_jsonl,
    fork,
    import_jsonl,
    migrate,
    new_id,
    open_store,
    read_view,
    verify,
)
from chatkeep.core import transfer as transfer_module
from chatkeep.core.errors import CapabilityMissing
from chatkeep.core.memory import MemoryStore
from chatkeep.core.metadata import list_session_infos
from chatkeep.core.views import TEMP_PREFIX
from chatkeep.testing.samples import fill_controlled_conversation

#: The ``counting_store`` fixture of conftest.py: ``store, backend = counting_store()``.
StoreFactory = Callable[..., tuple[Store, Any]]

BINARY = [b"", bytes(range(256)), b"\x00" * 9, b"\xff\xfe\xc3\x28", b"a\r\nb\n", b"\xed\xa0\x80"]
ODD_IDS = ["a\nb", "../x", "'\";--", "\U0001f600", "e\u0301", "\u2028", " ", "{tag}", "%2F"]


def everything(store: Store) -> dict[str, list[Record]]:
    return {session_id: store.read(session_id) for session_id in store.list_sessions()}


def exported(store: Store, **options: Any) -> str:
    out = io.StringIO()
    export_jsonl(store, out, **options)
    return out.getvalue()


def lines_of(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines()]


def filled() -> Store:
    """A store with binary records, odd ids and a conversation with every kind of control
    record (fork, forked, retract, checkpoint)."""
    store = open_store("memory://")
    store.append("binary", [Record(f"b{i}", data) for i, data in enumerate(BINARY)])
    for session_id in ODD_IDS:
        store.append(session_id, [Record(session_id, session_id.encode()), Record("2", b"\x00")])
    fill_controlled_conversation(
        store,
        ["Hi, I'm Ada.", "Plan a trip to Oslo.", "And Bergen?"],
        fork_question="Tromso?",
        keep=2,
    )
    return store


# -- the format --------------------------------------------------------------------------


def test_the_export_has_a_versioned_header_one_line_per_record_and_an_end_line() -> None:
    store = open_store("memory://")
    store.append("s1", [Record("r1", b"\x00\xff"), Record("r2", b"hi")])
    text = exported(store)
    assert text.endswith("\n")
    header, *records, end = lines_of(text)
    assert header["chatkeep"] == "export" and header["version"] == FORMAT_VERSION == 2
    assert header["backend"] == "memory" and header["created"].endswith("Z")
    assert records == [
        {"session": "s1", "n": 0, "id": "r1", "data": base64.b64encode(b"\x00\xff").decode()},
        {"session": "s1", "n": 1, "id": "r2", "text": "hi"},
    ]
    assert end == {"chatkeep": "end", "sessions": 1, "records": 2}


def test_an_empty_store_exports_a_header_and_an_end_line_and_imports_as_nothing() -> None:
    text = exported(open_store("memory://"))
    assert len(lines_of(text)) == 2
    target = open_store("memory://")
    assert import_jsonl(target, io.StringIO(text)) == TransferStats(0, 0, 0, 0)
    assert everything(target) == {}


def test_export_then_import_is_byte_exact_control_records_included() -> None:
    source = filled()
    kinds = {json.loads(r.data)["type"] for r in source.read("chat") + source.read("branch")}
    assert {"chatkeep.fork", "chatkeep.forked", "chatkeep.retract", "chatkeep.checkpoint"} <= kinds
    text = exported(source)
    target = open_store("memory://")
    stats = import_jsonl(target, io.StringIO(text))
    assert everything(target) == everything(source)
    total = sum(len(records) for records in everything(source).values())
    assert stats.records_copied == total and stats.records_skipped == 0
    assert stats.sessions == len(everything(source))
    assert stats.bytes == sum(len(r.data) for rs in everything(source).values() for r in rs)
    for session_id in ("chat", "branch"):  # the views work on the copy as on the original
        assert read_view(target, session_id) == read_view(source, session_id)
    assert len(read_view(target, "chat")) == 2


def test_lone_surrogates_in_record_ids_survive_the_file() -> None:
    source = open_store("memory://")
    source.append("s", [Record("\ud800x", b"1"), Record("\U0010ffff", b"2")])
    target = open_store("memory://")
    import_jsonl(target, io.StringIO(exported(source)))
    assert target.read("s") == source.read("s")


def test_importing_twice_imports_nothing_new() -> None:
    source = filled()
    text = exported(source)
    target = open_store("memory://")
    first = import_jsonl(target, io.StringIO(text))
    before = everything(target)
    again = import_jsonl(target, io.StringIO(text))
    assert everything(target) == before
    assert again == TransferStats(first.sessions, 0, first.records_copied, 0)


def test_an_import_continues_a_destination_holding_a_prefix() -> None:
    source = open_store("memory://")
    source.append("s", [Record(f"r{i}", b"x%d" % i) for i in range(10)])
    target = open_store("memory://")
    target.append("s", source.read("s", 0, 4))
    stats = import_jsonl(target, io.StringIO(exported(source)))
    assert target.read("s") == source.read("s")
    assert (stats.records_copied, stats.records_skipped) == (6, 4)


def test_an_id_stored_with_other_data_is_a_record_conflict_and_the_rest_is_not_stored() -> None:
    source = open_store("memory://")
    source.append("s", [Record("a", b"1"), Record("b", b"2"), Record("c", b"3")])
    target = open_store("memory://")
    target.append("s", [Record("a", b"1"), Record("b", b"other")])
    with pytest.raises(RecordConflict) as caught:
        import_jsonl(target, io.StringIO(exported(source)))
    assert (caught.value.session_id, caught.value.record_id) == ("s", "b")
    assert target.read("s") == [Record("a", b"1"), Record("b", b"other")]


def test_a_session_that_is_another_one_gets_the_records_appended_after_its_own() -> None:
    # Not the same session (different ids at the same places): append's rules decide.
    source = open_store("memory://")
    source.append("s", [Record("a", b"1")])
    target = open_store("memory://")
    target.append("s", [Record("z", b"9")])
    stats = import_jsonl(target, io.StringIO(exported(source)))
    assert target.read("s") == [Record("z", b"9"), Record("a", b"1")]
    assert stats.records_copied == 1


# -- greppable exports (issue 30 item 9) ---------------------------------------------------


def test_message_records_are_json_text_in_the_export_and_come_back_byte_exact() -> None:
    source = filled()
    message = Message.user('Zürich 🚆 and "quotes"\nnewline', message_id=new_id())
    source.append("s", encode_records([message]))
    text = exported(source)
    assert "Zürich 🚆" in text  # greppable as typed, not base64 nor \u escapes
    # Every message and control record the core wrote is JSON in the export.
    records = [line for line in lines_of(text) if line.get("session") in ("chat", "s")]
    assert records and all("json" in line for line in records)
    assert any(line["json"].get("role") == "user" for line in records)  # jq-able
    target = open_store("memory://")
    import_jsonl(target, io.StringIO(text))
    assert everything(target) == everything(source)


@pytest.mark.parametrize(
    "data",
    [
        b'{"a": 1}',  # not the compact encoding
        b'{"a":1e5}',  # a float written another way
        b'{"a":1,"a":2}',  # a duplicate key
        b'{"a":"\\u00fc"}',  # an escape the compact encoding would not write
        b"[1,2]\n",
        b"plain words, \xc3\xbc",
        b"",
        b"\xff\xfe not UTF-8",
        b'{"a":NaN}',
    ],
)
def test_every_record_comes_back_byte_exact_whatever_form_it_is_written_in(data: bytes) -> None:
    source = open_store("memory://")
    source.append("s", [Record("r", data)])
    target = open_store("memory://")
    import_jsonl(target, io.StringIO(exported(source)))
    assert target.read("s") == [Record("r", data)]


def test_a_record_id_that_is_not_utf8_is_written_in_ascii_and_imported() -> None:
    source = open_store("memory://")
    source.append("s", [Record("id \udfff", b'{"x":1}')])  # session ids refuse them
    text = exported(source)
    text.encode("utf-8")  # the file can be written as UTF-8
    target = open_store("memory://")
    import_jsonl(target, io.StringIO(text))
    assert everything(target) == everything(source)


def test_a_version_1_export_still_imports() -> None:
    text = "\n".join([HEADER, *GOOD, end_line(1, 2)]) + "\n"
    target = open_store("memory://")
    import_jsonl(target, io.StringIO(text))
    assert target.read("s") == [Record("a", b"1"), Record("b", b"2")]


# -- malformed input: typed errors naming the line, nothing half-imported silently ------------


def record_line(session: str, n: int, record_id: str, data: bytes) -> str:
    encoded = base64.b64encode(data).decode()
    return json.dumps({"session": session, "n": n, "id": record_id, "data": encoded})


HEADER = json.dumps({"chatkeep": "export", "version": 1})


def end_line(sessions: int, records: int) -> str:
    return json.dumps({"chatkeep": "end", "sessions": sessions, "records": records})


GOOD = [record_line("s", 0, "a", b"1"), record_line("s", 1, "b", b"2")]

BAD_LINES = {
    "not json": "{nope",
    "an array": "[1, 2]",
    "missing data": json.dumps({"session": "s", "n": 2, "id": "c"}),
    "an extra key": json.dumps({"session": "s", "n": 2, "id": "c", "data": "", "x": 1}),
    "two payloads": json.dumps({"session": "s", "n": 2, "id": "c", "data": "", "text": ""}),
    "text not a string": json.dumps({"session": "s", "n": 2, "id": "c", "text": 5}),
    "json with NaN": '{"session": "s", "n": 2, "id": "c", "json": {"x": NaN}}',
    "text with a lone surrogate": json.dumps({"session": "s", "n": 2, "id": "c", "text": "\ud800"}),
    "bad base64": json.dumps({"session": "s", "n": 2, "id": "c", "data": "!!!"}),
    "unpadded base64": json.dumps({"session": "s", "n": 2, "id": "c", "data": "YQ"}),
    "data not a string": json.dumps({"session": "s", "n": 2, "id": "c", "data": 5}),
    "empty session id": record_line("", 0, "c", b""),
    "NUL in a session id": record_line("a\x00b", 0, "c", b""),
    "empty record id": record_line("s", 2, "", b""),
    "a position not an int": json.dumps({"session": "s", "n": "2", "id": "c", "data": ""}),
    "a negative position": record_line("s", -1, "c", b""),
    "a position out of order": record_line("s", 5, "c", b""),
    "a gap before a session": record_line("t", 3, "c", b""),
    "an id twice in a session": record_line("s", 2, "b", b"2"),
    "an unknown marker": json.dumps({"chatkeep": "summary"}),
}


@pytest.mark.parametrize("name", sorted(BAD_LINES))
def test_a_bad_record_line_names_its_line_and_stores_exactly_the_lines_before(name: str) -> None:
    text = "\n".join([HEADER, *GOOD, BAD_LINES[name], record_line("s", 3, "d", b"4")]) + "\n"
    target = open_store("memory://")
    with pytest.raises(InvalidExport) as caught:
        import_jsonl(target, io.StringIO(text))
    error = caught.value
    assert isinstance(error, ChatkeepError) and isinstance(error, ValueError)
    assert error.line == 4, error
    assert error.records_stored == 2
    assert str(error).startswith("line 4 of the export: ") and "(2 new)" in str(error)
    assert target.read("s") == [Record("a", b"1"), Record("b", b"2")]


@pytest.mark.parametrize(
    ("header", "reason"),
    [
        (json.dumps({"chatkeep": "export", "version": 3}), "version 3"),
        (json.dumps({"chatkeep": "export", "version": "1"}), "not a number"),
        (json.dumps({"chatkeep": "export", "version": True}), "not a number"),
        (json.dumps({"chatkeep": "export"}), "not a number"),
        (json.dumps({"chatkeep": "backup", "version": 1}), "not a chatkeep export"),
        (record_line("s", 0, "a", b"1"), "not a chatkeep export"),
        ("not json at all", "not JSON"),
    ],
)
def test_a_bad_or_unknown_header_imports_nothing(header: str, reason: str) -> None:
    text = "\n".join([header, *GOOD, end_line(1, 2)]) + "\n"
    target = open_store("memory://")
    with pytest.raises(InvalidExport, match=reason) as caught:
        import_jsonl(target, io.StringIO(text))
    assert caught.value.line == 1 and caught.value.records_stored == 0
    assert everything(target) == {}


def test_a_newer_version_says_to_upgrade() -> None:
    text = json.dumps({"chatkeep": "export", "version": 7}) + "\n"
    with pytest.raises(InvalidExport, match="upgrade chatkeep-core"):
        import_jsonl(open_store("memory://"), io.StringIO(text))


def test_an_empty_file_is_not_an_export() -> None:
    with pytest.raises(InvalidExport, match="empty") as caught:
        import_jsonl(open_store("memory://"), io.StringIO(""))
    assert caught.value.line == 1


def test_a_file_cut_short_is_reported_after_importing_what_it_holds() -> None:
    source = open_store("memory://")
    source.append("s", [Record(f"r{i}", b"%d" % i) for i in range(5)])
    lines = exported(source).splitlines(keepends=True)
    target = open_store("memory://")
    with pytest.raises(InvalidExport, match="cut short") as caught:
        import_jsonl(target, io.StringIO("".join(lines[:4])))  # header + 3 records
    assert caught.value.line == 5 and caught.value.records_stored == 3
    assert target.read("s") == source.read("s", 0, 3)
    stats = import_jsonl(target, io.StringIO("".join(lines)))  # the whole file completes it
    assert target.read("s") == source.read("s")
    assert (stats.records_copied, stats.records_skipped) == (2, 3)


@pytest.mark.parametrize("end", [end_line(1, 3), end_line(2, 2), '{"chatkeep": "end"}'])
def test_an_end_line_whose_counts_disagree_means_lines_are_missing(end: str) -> None:
    text = "\n".join([HEADER, *GOOD, end]) + "\n"
    target = open_store("memory://")
    with pytest.raises(InvalidExport, match="lines are missing") as caught:
        import_jsonl(target, io.StringIO(text))
    assert caught.value.line == 4
    assert len(target.read("s")) == 2


def test_a_line_after_the_end_line_is_refused() -> None:
    text = "\n".join([HEADER, *GOOD, end_line(1, 2), record_line("s", 2, "c", b"")]) + "\n"
    with pytest.raises(InvalidExport, match="after the end line") as caught:
        import_jsonl(open_store("memory://"), io.StringIO(text))
    assert caught.value.line == 5


def test_blank_lines_crlf_line_ends_and_a_byte_order_mark_are_accepted() -> None:
    text = "\ufeff" + "\r\n".join([HEADER, "", *GOOD, "   ", end_line(1, 2), "", ""])
    target = open_store("memory://")
    assert import_jsonl(target, io.StringIO(text, newline="")).records_copied == 2
    assert target.read("s") == [Record("a", b"1"), Record("b", b"2")]


def test_a_session_continued_later_in_the_file_is_imported_in_order() -> None:
    text = "\n".join(
        [
            HEADER,
            record_line("s", 0, "a", b"1"),
            record_line("t", 0, "x", b"9"),
            record_line("s", 1, "b", b"2"),
            end_line(3, 3),
        ]
    )
    target = open_store("memory://")
    import_jsonl(target, io.StringIO(text))
    assert target.read("s") == [Record("a", b"1"), Record("b", b"2")]
    assert target.read("t") == [Record("x", b"9")]


# -- which sessions --------------------------------------------------------------------------


def test_the_cores_temporary_sessions_are_left_out_and_named_sessions_are_exported() -> None:
    store = open_store("memory://")
    store.append("keep", [Record("a", b"1")])
    store.append("other", [Record("b", b"2")])
    store.append(TEMP_PREFIX + "x", [Record("t", b"tmp")])
    assert {line.get("session") for line in lines_of(exported(store))} == {None, "keep", "other"}
    named = lines_of(exported(store, sessions=["other"]))
    assert [line.get("session") for line in named[1:-1]] == ["other"]
    target = open_store("memory://")
    migrate(store, target)
    assert sorted(target.list_sessions()) == ["keep", "other"]


def forked_three_levels() -> Store:
    """``chat`` forked into ``branch``, ``branch`` forked into ``twig``, each with its own
    turn, and an unrelated ``other``."""
    store = open_store("memory://")
    store.append("chat", encode_records([Message.user("Hi", message_id=new_id())]))
    fork(store, "chat", new_session_id="branch")
    store.append("branch", encode_records([Message.user("Oslo?", message_id=new_id())]))
    fork(store, "branch", new_session_id="twig")
    store.append("twig", encode_records([Message.user("Bergen?", message_id=new_id())]))
    store.append("other", [Record("o", b"unrelated")])
    return store


def test_a_named_fork_is_migrated_with_its_ancestors_counted_and_verified() -> None:
    source = forked_three_levels()
    target = open_store("memory://")
    seen: list[TransferProgress] = []
    stats = migrate(source, target, sessions=["twig"], progress=seen.append)
    assert sorted(target.list_sessions()) == ["branch", "chat", "twig"]
    assert stats.sessions == 3
    assert stats.records_copied == sum(len(source.read(s)) for s in ("chat", "branch", "twig"))
    assert {p.sessions_total for p in seen} == {3}
    order = [p.session_id for p in seen]
    assert order.index("chat") < order.index("branch") < order.index("twig")  # ancestors first
    assert read_view(target, "twig") == read_view(source, "twig")
    assert [m.text for m in read_view(target, "twig")] == ["Hi", "Oslo?", "Bergen?"]
    assert {info.id for info in list_session_infos(target)} == {"chat", "branch", "twig"}
    # Verification covers the ancestors: a parent altered in the destination is found.
    target.delete("chat")
    target.append("chat", [Record("x", b"not the parent")])
    mismatches = verify(source, target, sessions=["twig"])
    assert [m.session_id for m in mismatches] == ["chat"]


def test_a_named_fork_is_exported_with_its_ancestors_and_imports_whole() -> None:
    source = forked_three_levels()
    text = exported(source, sessions=["branch", "twig", "chat"])
    sessions = [line["session"] for line in lines_of(text)[1:-1]]
    assert list(dict.fromkeys(sessions)) == ["chat", "branch", "twig"]  # once each
    assert lines_of(text)[-1]["sessions"] == 3
    target = open_store("memory://")
    assert import_jsonl(target, io.StringIO(text)).sessions == 3
    assert read_view(target, "twig") == read_view(source, "twig")
    alone = exported(source, sessions=["branch"])
    assert list(dict.fromkeys(line["session"] for line in lines_of(alone)[1:-1])) == [
        "chat",
        "branch",
    ]


def test_a_fork_whose_parent_is_gone_is_copied_alone() -> None:
    source = forked_three_levels()
    source.delete("chat")  # raw delete: branch dangles in the source already
    target = open_store("memory://")
    assert migrate(source, target, sessions=["branch"]).sessions == 1
    assert target.read("branch") == source.read("branch")


def test_a_named_session_without_records_is_not_found_before_anything_is_written() -> None:
    store = open_store("memory://")
    store.append("keep", [Record("a", b"1")])
    out = io.StringIO()
    with pytest.raises(SessionNotFound):
        export_jsonl(store, out, sessions=["keep", "nope"])
    assert out.getvalue() == ""
    with pytest.raises(SessionNotFound):
        migrate(store, open_store("memory://"), sessions=["nope"])


def test_a_single_string_is_not_taken_for_a_list_of_sessions() -> None:
    store = open_store("memory://")
    store.append("abc", [Record("a", b"1")])
    for call in (
        lambda: export_jsonl(store, io.StringIO(), sessions="abc"),
        lambda: migrate(store, open_store("memory://"), sessions="abc"),
        lambda: verify(store, open_store("memory://"), sessions="abc"),
    ):
        with pytest.raises(TypeError, match="not a single string"):
            call()


class NoListing:
    """A backend without the list_sessions capability."""

    capabilities: ClassVar[frozenset[str]] = frozenset()

    def __init__(self) -> None:
        self.inner = MemoryStore()

    def append(self, session_id: str, records: list[Record]) -> None:
        self.inner.append(session_id, records)

    def read(self, session_id: str, start: int = 0, stop: int | None = None) -> list[Record]:
        return self.inner.read(session_id, start, stop)


def test_a_store_that_cannot_list_needs_the_sessions_named() -> None:
    store = Store(NoListing(), name="nolist")
    store.append("s", [Record("a", b"1")])
    with pytest.raises(CapabilityMissing):
        export_jsonl(store, io.StringIO())
    with pytest.raises(CapabilityMissing):
        migrate(store, open_store("memory://"))
    target = open_store("memory://")
    migrate(store, target, sessions=["s"])
    assert target.read("s") == [Record("a", b"1")]


# -- migrate and verify ------------------------------------------------------------------------


def test_migrate_copies_everything_byte_exact_and_a_rerun_copies_nothing() -> None:
    source = filled()
    target = open_store("memory://")
    first = migrate(source, target)
    assert everything(target) == everything(source)
    assert verify(source, target) == []
    again = migrate(source, target)
    assert everything(target) == everything(source)
    assert again == TransferStats(first.sessions, 0, first.records_copied, 0)


def test_migrate_resumes_after_the_destinations_last_record_in_few_reads(
    counting_store: StoreFactory,
) -> None:
    source = open_store("memory://")
    source.append("s", [Record(f"r{i:05}", b"x") for i in range(3000)])
    target, backend = counting_store()
    target.append("s", source.read("s", 0, 2000))
    backend.reads.clear()
    stats = migrate(source, target, verify=False)
    reads = list(backend.reads)
    assert target.read("s") == source.read("s")
    assert (stats.records_copied, stats.records_skipped) == (1000, 2000)
    # probing the destination's length costs O(log n) one-record reads; nothing else read
    assert reads and all(stop is not None and stop - start == 1 for _, start, stop, _ in reads)
    assert len(reads) <= 30


def test_verification_fails_on_a_destination_that_holds_more_or_other_records() -> None:
    source = open_store("memory://")
    source.append("longer", [Record("a", b"1")])
    source.append("other", [Record("a", b"1")])
    target = open_store("memory://")
    target.append("longer", [Record("a", b"1"), Record("extra", b"!")])
    target.append("other", [Record("a", b"1")])
    found = verify(source, target)
    assert [m.session_id for m in found] == ["longer"]
    (mismatch,) = found
    assert (mismatch.source_count, mismatch.destination_count) == (1, 2)
    assert mismatch.source_digest != mismatch.destination_digest
    assert len(mismatch.source_digest) == 64
    with pytest.raises(VerificationFailed) as caught:
        migrate(source, target)
    assert caught.value.mismatches == found
    assert "'longer' (1 record in the source, 2 in the destination)" in str(caught.value)
    assert target.read("other") == [Record("a", b"1")]  # every session was still copied


def test_verify_tells_same_counts_with_other_content_apart() -> None:
    source = open_store("memory://")
    source.append("s", [Record("a", b"1"), Record("b", b"2")])
    target = open_store("memory://")
    target.append("s", [Record("b", b"2"), Record("a", b"1")])  # same records, other order
    (mismatch,) = verify(source, target)
    assert mismatch == SessionMismatch(
        "s", 2, 2, mismatch.source_digest, mismatch.destination_digest
    )
    assert mismatch.source_digest != mismatch.destination_digest
    error = VerificationFailed([mismatch] * 7)
    assert "other content" in str(error) and "and 2 more" in str(error)
    assert isinstance(error, ChatkeepError)


def test_the_digest_frames_ids_and_data_so_moving_a_byte_between_them_shows() -> None:
    source = open_store("memory://")
    source.append("s", [Record("ab", b"c")])
    target = open_store("memory://")
    target.append("s", [Record("a", b"bc")])
    assert len(verify(source, target)) == 1


def test_a_destination_with_different_records_in_front_is_compared_page_by_page() -> None:
    source = open_store("memory://")
    source.append("s", [Record(f"r{i}", b"x") for i in range(6)])
    target = open_store("memory://")
    target.append("s", [Record("r0", b"x"), Record("r1", b"x"), Record("zz", b"!")])
    with pytest.raises(VerificationFailed):
        migrate(source, target)
    # r0 and r1 were found in place; r2..r5 appended after the foreign record
    assert [r.id for r in target.read("s")] == ["r0", "r1", "zz", "r2", "r3", "r4", "r5"]


def test_migrate_raises_record_conflict_for_an_id_stored_with_other_data() -> None:
    source = open_store("memory://")
    source.append("s", [Record("a", b"1"), Record("b", b"2")])
    target = open_store("memory://")
    target.append("s", [Record("b", b"other")])
    with pytest.raises(RecordConflict) as caught:
        migrate(source, target)
    assert caught.value.record_id == "b"
    # the records before the conflicting one are stored, the rest is not
    assert target.read("s") == [Record("b", b"other"), Record("a", b"1")]


def test_an_import_stores_the_records_before_a_conflict_inside_a_batch() -> None:
    source = open_store("memory://")
    source.append("s", [Record(i, i.encode()) for i in "abcd"])
    target = open_store("memory://")
    target.append("s", [Record("c", b"other")])
    with pytest.raises(RecordConflict):
        import_jsonl(target, io.StringIO(exported(source)))
    assert target.read("s") == [Record("c", b"other"), Record("a", b"a"), Record("b", b"b")]


# -- bounded memory: pages, never a whole session -------------------------------------------


@pytest.fixture
def small_pages(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(transfer_module, "PAGE_RECORDS", 7)
    monkeypatch.setattr(transfer_module, "PAGE_BYTES", 64)


@pytest.mark.usefixtures("small_pages")
def test_every_read_and_append_is_bounded(counting_store: StoreFactory) -> None:
    source, source_backend = counting_store()
    big = [Record(f"big{i}", bytes([i]) * 40) for i in range(10)]  # 40 bytes: pages of 1
    small = [Record(f"s{i:03}", b"%d" % i) for i in range(50)]
    source.append("big", big)
    source.append("small", small)
    source_backend.reads.clear()
    text = exported(source)
    target, target_backend = counting_store()
    import_jsonl(target, io.StringIO(text))
    third, third_backend = counting_store()
    migrate(source, third)
    for backend in (source_backend, target_backend, third_backend):
        assert backend.reads and all(stop is not None for _, _, stop, _ in backend.reads)
        assert max(stop - start for _, start, stop, _ in backend.reads if stop) <= 7
    for backend in (target_backend, third_backend):
        assert max(len(records) for _, records in backend.appends) <= 7
    big_reads = [got for sid, start, _, got in source_backend.reads if sid == "big" and start]
    assert big_reads and max(big_reads) == 1  # large records shrink the pages
    assert everything(target) == everything(source) == everything(third)
    target_backend.reads.clear()
    again = import_jsonl(target, io.StringIO(text))  # compares with what is stored, paged
    assert again.records_skipped == 60 and again.records_copied == 0
    assert max(stop - start for _, start, stop, _ in target_backend.reads if stop) <= 7
    windows = [got for sid, start, _, got in target_backend.reads if sid == "big" and start > 1]
    assert windows and max(windows) == 1


def test_progress_is_reported_per_page_with_what_is_known(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(transfer_module, "PAGE_RECORDS", 4)
    source = open_store("memory://")
    source.append("a", [Record(f"r{i}", b"xy") for i in range(10)])
    source.append("b", [Record("r", b"z")])
    seen: list[TransferProgress] = []
    stats = migrate(source, open_store("memory://"), sessions=["a", "b"], progress=seen.append)
    assert stats == TransferStats(2, 11, 0, 21)
    assert {p.sessions_total for p in seen} == {2}
    assert [p.records_done for p in seen] == sorted(p.records_done for p in seen)
    assert seen[-1].records_done == 11 and seen[-1].bytes_done == 21
    assert seen[-1].sessions_done == 2 and seen[-1].session_id == "b"
    assert [p.records_done for p in seen if p.session_id == "a"][:3] == [4, 8, 10]
    assert all(p.elapsed >= 0 for p in seen)
    listed: list[TransferProgress] = []
    export_jsonl(source, io.StringIO(), progress=listed.append)
    assert listed and {p.sessions_total for p in listed} == {None}
    assert listed[-1].records_done == 11


class NullBackend:
    """Stores nothing and reads as empty: what an import costs in memory, store aside."""

    capabilities: ClassVar[frozenset[str]] = frozenset({"list_sessions"})

    def append(self, session_id: str, records: list[Record]) -> None:
        pass

    def read(self, session_id: str, start: int = 0, stop: int | None = None) -> list[Record]:
        return []

    def list_sessions(self, prefix: str | None = None) -> Iterator[str]:
        return iter(())


class Discard(io.TextIOBase):
    """A text stream that counts what is written and keeps none of it."""

    def __init__(self) -> None:
        self.characters = 0

    def write(self, text: str) -> int:
        self.characters += len(text)
        return len(text)


class GeneratedExport(io.TextIOBase):
    """An export of ``count`` random records of ``size`` bytes in one session, made line
    by line as it is read (never the whole file)."""

    def __init__(self, count: int, size: int) -> None:
        self.lines = self._lines(count, size)

    @staticmethod
    def _lines(count: int, size: int) -> Iterator[str]:
        yield HEADER + "\n"
        for n in range(count):
            yield record_line("big", n, f"r{n:05}", os.urandom(size)) + "\n"
        yield end_line(1, count) + "\n"

    def readable(self) -> bool:
        return True

    def readline(self, size: int | None = -1) -> str:
        return next(self.lines, "")


def test_memory_stays_bounded_however_big_the_store() -> None:
    size, count = 4096, 10_000  # 40 MiB of records in one session
    source = open_store("memory://")
    for start in range(0, count, 1000):
        batch = [Record(f"r{i:05}", os.urandom(size)) for i in range(start, start + 1000)]
        source.append("big", batch)
    sink = Discard()
    tracemalloc.start()
    try:
        export_jsonl(source, sink)
        _, export_peak = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        stats = import_jsonl(Store(NullBackend(), name="null"), GeneratedExport(count, size))
        _, import_peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert sink.characters > count * size * 4 // 3  # the whole store went through
    assert stats.records_copied == count
    limit = 16 * 1024 * 1024  # a few pages; the store holds 40 MiB, its export 54 MiB
    assert export_peak < limit, export_peak
    assert import_peak < limit, import_peak


class FailingAppends:
    """Fault injection: the ``fail_at``-th append raises StoreUnavailable (nothing stored)."""

    capabilities: ClassVar[frozenset[str]] = frozenset({"list_sessions"})

    def __init__(self, fail_at: int) -> None:
        self.inner = MemoryStore()
        self.fail_at = fail_at
        self.appends = 0

    def append(self, session_id: str, records: list[Record]) -> None:
        self.appends += 1
        if self.appends == self.fail_at:
            raise StoreUnavailable("injected: the server went away")
        self.inner.append(session_id, records)

    def read(self, session_id: str, start: int = 0, stop: int | None = None) -> list[Record]:
        return self.inner.read(session_id, start, stop)

    def list_sessions(self, prefix: str | None = None) -> Iterator[str]:
        return self.inner.list_sessions(prefix)


@pytest.mark.parametrize("operation", ["migrate", "import"])
def test_a_failure_part_way_leaves_prefixes_and_running_again_completes(
    operation: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(transfer_module, "PAGE_RECORDS", 3)
    source = open_store("memory://")
    for name in ("a", "b"):
        source.append(name, [Record(f"{name}{i}", b"%d" % i) for i in range(7)])
    text = exported(source)
    backend = FailingAppends(fail_at=4)  # a: 3 + 3 + 1, then b's first batch fails
    target = Store(backend, name="flaky")

    def run_once() -> TransferStats:
        if operation == "migrate":
            return migrate(source, target)
        return import_jsonl(target, io.StringIO(text))

    with pytest.raises(StoreUnavailable):
        run_once()
    assert target.read("a") == source.read("a") and target.read("b") == []
    stats = run_once()
    assert everything(target) == everything(source)
    assert (stats.records_copied, stats.records_skipped) == (7, 7)


def test_a_mismatch_message_pluralises_its_counts() -> None:
    from chatkeep.core.errors import SessionMismatch

    def text(source: int, destination: int) -> str:
        mismatch = SessionMismatch("s", source, destination, "a", "b")
        return str(VerificationFailed([mismatch]))

    assert "'s' (1 record in the source, 0 in the destination)" in text(1, 0)
    assert "'s' (2 records in the source, 1 in the destination)" in text(2, 1)
    assert "'s' (0 records in the source, 1 in the destination)" in text(0, 1)
    assert "(3 records in the source, 3 in the destination, other content)" in text(3, 3)
