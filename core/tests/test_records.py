"""Session id and batch validation, and the UUIDv7 message ids."""

from __future__ import annotations

import itertools
import queue
import threading
import time
import uuid

import pytest

from chatkeep.core import InvalidRecord, InvalidSessionId, Record, check_session_id, new_id
from chatkeep.core.errors import ChatkeepError
from chatkeep.core.records import check_records

# -- session ids ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "session_id",
    [
        "a",
        "a" * 512,
        "😀" * 512,  # 512 characters, 2048 UTF-8 bytes
        "../../etc/passwd",
        "a;DROP TABLE sessions;--",
        "key*pattern?[x]",
        "{hash}tag",
        "%00%2F",
        " ",
        "\n\t\r",
        "a/b\\c:d",
        "user:1:sessions",
        "\u202e\ufeffbidi",
    ],
    ids=lambda s: repr(s)[:30],
)
def test_valid_session_ids_are_accepted_unchanged(session_id: str) -> None:
    assert check_session_id(session_id) == session_id


@pytest.mark.parametrize(
    "session_id",
    ["", "a" * 513, "😀" * 513, "a\x00b", "\x00", "lone \ud800 surrogate", "\udfff"],
    ids=lambda s: repr(s)[:30],
)
def test_invalid_session_id_strings_are_rejected(session_id: str) -> None:
    with pytest.raises(InvalidSessionId) as info:
        check_session_id(session_id)
    assert info.value.session_id == session_id
    assert info.value.reason


@pytest.mark.parametrize("session_id", [None, 5, b"abc", ["a"], 1.5, object()])
def test_non_str_session_ids_are_rejected(session_id: object) -> None:
    with pytest.raises(InvalidSessionId, match="must be a str"):
        check_session_id(session_id)


def test_str_subclass_is_accepted_as_plain_str() -> None:
    class Tagged(str):
        pass

    result = check_session_id(Tagged("abc"))
    assert result == "abc"
    assert type(result) is str


def test_invalid_session_id_is_a_value_error_and_chatkeep_error() -> None:
    with pytest.raises(ValueError):
        check_session_id("")
    assert issubclass(InvalidSessionId, ChatkeepError)


@pytest.mark.parametrize("huge", ["x" * 1_000_000, b"y" * 1_000_000, "z\x00" * 500_000])
def test_error_message_stays_short_for_huge_ids(huge: object) -> None:
    with pytest.raises(InvalidSessionId) as info:
        check_session_id(huge)
    message = str(info.value)
    assert len(message) < 300
    assert "invalid session id" in message


def test_error_message_says_what_was_wrong() -> None:
    with pytest.raises(InvalidSessionId, match="513 characters"):
        check_session_id("a" * 513)
    with pytest.raises(InvalidSessionId, match="NUL"):
        check_session_id("a\x00")
    with pytest.raises(InvalidSessionId, match="empty"):
        check_session_id("")
    with pytest.raises(InvalidSessionId, match="UTF-8"):
        check_session_id("\ud800")


# -- batches --------------------------------------------------------------------------------


def test_check_records_accepts_tuples_and_bytes_like() -> None:
    batch = check_records(
        [Record("a", b"1"), ("b", b"2"), ("c", bytearray(b"3")), ("d", memoryview(b"4"))]
    )
    assert batch == [Record("a", b"1"), Record("b", b"2"), Record("c", b"3"), Record("d", b"4")]
    assert all(type(record) is Record and type(record.data) is bytes for record in batch)


def test_check_records_copies_mutable_data_inside_a_record() -> None:
    # A Record holding a bytearray must be stored as bytes: later changes to the caller's
    # buffer must not reach what was appended.
    buffer = bytearray(b"original")
    (record,) = check_records([Record("a", buffer)])  # type: ignore[arg-type]
    assert type(record.data) is bytes
    buffer[:] = b"mutated!"
    assert record.data == b"original"


def test_check_records_accepts_any_iterable() -> None:
    assert check_records(iter([("a", b"")])) == [Record("a", b"")]
    assert check_records(()) == []


@pytest.mark.parametrize(
    ("batch", "match"),
    [
        ([5], "not an \\(id, data\\) pair"),
        ([("a", b"x", 1)], "not an \\(id, data\\) pair"),
        ([None], "not an \\(id, data\\) pair"),
        ([("", b"x")], "invalid id"),
        ([(5, b"x")], "invalid id"),
        ([(None, b"x")], "invalid id"),
        ([("a" * 257, b"x")], "256"),
        ([("a\x00", b"x")], "NUL"),
        ([("a", "text")], "must be bytes"),
        ([("a", None)], "must be bytes"),
        ([("a", [1, 2])], "must be bytes"),
        ([("a", b"1"), ("b", b"2"), ("a", b"3")], "appears twice"),
    ],
)
def test_check_records_rejects_bad_batches(batch: list[object], match: str) -> None:
    with pytest.raises(InvalidRecord, match=match):
        check_records(batch)  # type: ignore[arg-type]


def test_check_records_names_the_position() -> None:
    with pytest.raises(InvalidRecord, match="record 2"):
        check_records([("a", b""), ("b", b""), ("c", "not bytes")])  # type: ignore[list-item]


def test_record_id_of_256_characters_is_fine() -> None:
    assert check_records([("a" * 256, b"")])[0].id == "a" * 256


# -- ids ------------------------------------------------------------------------------------


def test_new_id_is_a_uuid7_with_the_current_time() -> None:
    before = time.time_ns() // 1_000_000
    value = new_id()
    after = time.time_ns() // 1_000_000
    parsed = uuid.UUID(value)
    assert str(parsed) == value  # canonical lowercase, hyphenated
    assert parsed.version == 7
    assert parsed.variant == uuid.RFC_4122
    millis = parsed.int >> 80
    assert before <= millis <= after + 1


def test_new_ids_are_unique_and_strictly_increasing() -> None:
    ids = [new_id() for _ in range(100_000)]
    assert len(set(ids)) == len(ids)
    assert all(a < b for a, b in itertools.pairwise(ids))
    # Bursts within one millisecond still carry a sane timestamp (no runaway borrowing).
    last_millis = uuid.UUID(ids[-1]).int >> 80
    assert last_millis <= time.time_ns() // 1_000_000 + 1_000


def test_new_ids_are_unique_across_threads() -> None:
    results: list[list[str]] = [[] for _ in range(4)]

    def work(out: list[str]) -> None:
        for _ in range(20_000):
            out.append(new_id())

    threads = [threading.Thread(target=work, args=(out,)) for out in results]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    everything = [value for out in results for value in out]
    assert len(set(everything)) == len(everything)
    for out in results:
        assert all(a < b for a, b in itertools.pairwise(out))


def test_ids_made_later_in_another_thread_sort_later() -> None:
    # Ping-pong between two threads: each id is made after the previous one was seen.
    to_worker: queue.Queue[str | None] = queue.Queue()
    to_main: queue.Queue[str] = queue.Queue()

    def worker() -> None:
        while to_worker.get() is not None:
            to_main.put(new_id())

    thread = threading.Thread(target=worker)
    thread.start()
    sequence = []
    try:
        for _ in range(500):
            sequence.append(new_id())
            to_worker.put("go")
            sequence.append(to_main.get(timeout=5))
    finally:
        to_worker.put(None)
        thread.join()
    assert all(a < b for a, b in itertools.pairwise(sequence))
