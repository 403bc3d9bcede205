"""Events round-trip exactly, and every stored event is a chatkeep message too.

An event comes back equal to the one appended (its content parts, function calls and
responses, inline data, actions, ids, author, branch, times, grounding and usage
metadata); what is not kept is what ADK's own JSON form does not keep, so the claim
tested is "equal to ``Event.model_validate(event.model_dump(mode="json",
exclude_none=True))``", the round trip ADK's database service makes.
"""

from __future__ import annotations

import math
import typing
from datetime import datetime, timezone
from types import UnionType
from typing import Any

import pytest
from google.adk.events.event import Event
from google.adk.events.event_actions import EventActions
from google.genai import types
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from chatkeep.core import open_store, read_view
from chatkeep.core.views import read_log
from chatkeep.google_adk import ChatkeepSessionService
from chatkeep.google_adk.layout import session_keys
from chatkeep.google_adk.parts import PART_TYPE, content_of_part, part_of_content
from chatkeep.testing import example_count

APP = "app"

# -- parts ------------------------------------------------------------------------------------

texts = st.text(max_size=40)
# Finite floats: ADK's JSON form turns an infinity inside a JSON value into null (see
# test_what_is_not_kept_is_what_adks_json_form_does_not_keep).
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | texts,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
    max_leaves=8,
)
json_objects = st.dictionaries(texts, json_values, max_size=3)
maybe = st.none() | texts


@st.composite
def parts(draw: st.DrawFn) -> types.Part:
    """Parts of every shape the contents mapping knows, and others, with and without the
    optional fields that decide which way a part is stored."""
    kind = draw(st.sampled_from(["text", "thought", "call", "response", "file", "blob", "code"]))
    if kind == "text":
        return types.Part(text=draw(texts), thought=draw(st.sampled_from([None, False])))
    if kind == "thought":
        signature = draw(st.none() | st.binary(max_size=8))
        return types.Part(text=draw(texts), thought=True, thought_signature=signature)
    if kind == "call":
        call = types.FunctionCall(
            id=draw(maybe),
            name=draw(maybe),
            args=draw(st.none() | json_objects),
            will_continue=draw(st.sampled_from([None, True])),
        )
        return types.Part(function_call=call)
    if kind == "response":
        response = types.FunctionResponse(
            id=draw(maybe), name=draw(maybe), response=draw(st.none() | json_objects)
        )
        return types.Part(function_response=response)
    if kind == "file":
        return types.Part(
            file_data=types.FileData(
                file_uri=draw(maybe), mime_type=draw(maybe), display_name=draw(maybe)
            )
        )
    if kind == "blob":
        return types.Part.from_bytes(data=draw(st.binary(max_size=16)), mime_type="image/png")
    return types.Part(executable_code=types.ExecutableCode(code=draw(texts), language="PYTHON"))


def part_json(part: types.Part) -> dict[str, Any]:
    dumped: dict[str, Any] = part.model_dump(mode="json", exclude_none=True)
    return dumped


@given(parts())
def test_every_part_is_stored_once_and_read_back_as_it_was(part: types.Part) -> None:
    """The contents mapping (:mod:`chatkeep.google_adk.parts`) inverts exactly."""
    raw = part_json(part)
    content = content_of_part(raw)
    assert part_of_content(content) == raw
    assert types.Part.model_validate(part_of_content(content)) == part


def test_parts_chatkeep_understands_are_stored_as_its_own_contents() -> None:
    call = types.FunctionCall(id="c1", name="weather", args={"city": "Oslo"})
    response = types.FunctionResponse(id="c1", name="weather", response={"t": 20})
    shapes = [
        (types.Part(text="hi"), {"type": "text", "text": "hi"}),
        (
            types.Part(text="hmm", thought=True, thought_signature=b"\x01"),
            {"type": "text_reasoning", "text": "hmm", "protected_data": "AQ=="},
        ),
        (
            types.Part(function_call=call),
            {
                "type": "function_call",
                "call_id": "c1",
                "name": "weather",
                "arguments": {"city": "Oslo"},
            },
        ),
        (
            types.Part(function_response=response),
            {"type": "function_result", "call_id": "c1", "result": {"t": 20}, "name": "weather"},
        ),
        (
            types.Part(file_data=types.FileData(file_uri="gs://b/f.pdf", mime_type="a/pdf")),
            {"type": "uri", "uri": "gs://b/f.pdf", "media_type": "a/pdf"},
        ),
    ]
    for part, expected in shapes:
        assert content_of_part(part_json(part)) == expected
    blob = part_json(types.Part.from_bytes(data=b"\x00", mime_type="image/png"))
    assert content_of_part(blob) == {"type": PART_TYPE, "part": blob}  # kept verbatim
    with pytest.raises(ValueError, match="not a content"):
        part_of_content({"type": "data", "uri": "data:,"})


# -- whole events -----------------------------------------------------------------------------


def everything(**extra: Any) -> Event:
    """An event with every field the issue names set, and more."""
    return Event(
        invocation_id="inv-1",
        author="assistant",
        branch="root.assistant",
        content=types.Content(
            role="model",
            parts=[
                types.Part(text="Let me check."),
                types.Part(text="thinking", thought=True, thought_signature=b"\x00sig"),
                types.Part(function_call=types.FunctionCall(id="c1", name="f", args={"a": [1]})),
                types.Part.from_bytes(data=bytes(range(256)), mime_type="image/png"),
                types.Part(file_data=types.FileData(file_uri="gs://b/x", mime_type="text/plain")),
            ],
        ),
        actions=EventActions(
            state_delta={"k": {"nested": [1, None, "x"]}, "user:u": 1, "app:a": True},
            artifact_delta={"report.pdf": 2},
            transfer_to_agent="other",
            escalate=False,
            skip_summarization=True,
        ),
        grounding_metadata=types.GroundingMetadata(
            web_search_queries=["q"],
            search_entry_point=types.SearchEntryPoint(sdk_blob=b"\xff\x00blob"),
        ),
        usage_metadata=types.GenerateContentResponseUsageMetadata(
            prompt_token_count=10, candidates_token_count=5, total_token_count=15
        ),
        citation_metadata=types.CitationMetadata(citations=[types.Citation(uri="https://x")]),
        custom_metadata={"trace": "t-1", "n": 1.5},
        long_running_tool_ids={"c1", "c2"},
        finish_reason=types.FinishReason.STOP,
        model_version="scripted-1",
        turn_complete=True,
        error_code="E",
        error_message="message",
        avg_logprobs=-0.25,
        timestamp=1700000000.123456,
        **extra,
    )


def adk_round_trip(event: Event) -> Event:
    """What ADK's database service makes of an event: its JSON form, validated back."""
    return Event.model_validate(event.model_dump(mode="json", exclude_none=True))


@pytest.mark.anyio
async def test_an_event_with_everything_round_trips_on_every_store(
    chatkeep_service: ChatkeepSessionService,
) -> None:
    session = await chatkeep_service.create_session(app_name=APP, user_id="u")
    sent = everything()
    await chatkeep_service.append_event(session, sent)
    got = await chatkeep_service.get_session(app_name=APP, user_id="u", session_id=session.id)
    assert got is not None and got.events == [sent] == [adk_round_trip(sent)]
    assert got.events[0].content.parts[3].inline_data.data == bytes(range(256))  # type: ignore[union-attr]
    assert got.state == {"k": {"nested": [1, None, "x"]}, "user:u": 1, "app:a": True}


@pytest.mark.anyio
@settings(
    max_examples=example_count(40),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(content=st.lists(parts(), max_size=4), role=st.sampled_from(["user", "model", None]))
async def test_generated_events_round_trip(content: list[types.Part], role: str | None) -> None:
    service = ChatkeepSessionService(url="memory://")
    session = await service.create_session(app_name=APP, user_id="u")
    sent = Event(author="x", content=types.Content(role=role, parts=content))
    await service.append_event(session, sent)
    got = await service.get_session(app_name=APP, user_id="u", session_id=session.id)
    assert got is not None and got.events == [sent]


@pytest.mark.anyio
async def test_values_only_the_codec_can_hold_round_trip() -> None:
    """A dict with the codec's tag key, and NaN/infinity where a field keeps them as
    floats: stored through the codec's tagged form, read back exactly."""
    service = ChatkeepSessionService(url="memory://")
    session = await service.create_session(
        app_name=APP, user_id="u", state={"__chatkeep__": {"__chatkeep__": 1}, "x": math.inf}
    )
    sent = Event(
        author="user",
        avg_logprobs=math.nan,
        content=types.Content(
            role="user",
            parts=[
                types.Part(
                    function_call=types.FunctionCall(
                        id="c", name="f", args={"__chatkeep__": "bytes", "value": "not a tag"}
                    )
                )
            ],
        ),
        actions=EventActions(state_delta={"y": -math.inf}),
    )
    await service.append_event(session, sent)
    got = await service.get_session(app_name=APP, user_id="u", session_id=session.id)
    assert got is not None
    assert got.events[0].content == sent.content
    assert math.isnan(got.events[0].avg_logprobs)  # type: ignore[arg-type]
    assert got.state == {"__chatkeep__": {"__chatkeep__": 1}, "x": math.inf, "y": -math.inf}
    key = session_keys(APP, "u", session.id).session
    assert read_view(service.store, key)[0].contents[0].arguments == {  # type: ignore[union-attr]
        "__chatkeep__": "bytes",
        "value": "not a tag",
    }


@pytest.mark.anyio
async def test_what_is_not_kept_is_what_adks_json_form_does_not_keep() -> None:
    """``Any``-typed values (``custom_metadata``, ``output``, state) come back in their
    JSON form, as from ADK's database service: tuples and sets as lists, datetimes as
    ISO strings, bytes as base64, infinities inside them as ``null``."""
    service = ChatkeepSessionService(url="memory://")
    session = await service.create_session(app_name=APP, user_id="u")
    when = datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
    sent = Event(
        author="user",
        custom_metadata={"pair": (1, 2), "when": when, "raw": b"\x01", "big": math.inf},
        output={"tags": {"a"}},
        actions=EventActions(state_delta={"when": when}),
    )
    await service.append_event(session, sent)
    got = await service.get_session(app_name=APP, user_id="u", session_id=session.id)
    assert got is not None
    assert got.events == [adk_round_trip(sent)]
    assert got.events[0].custom_metadata == {
        "pair": [1, 2],
        "when": "2026-01-02T03:04:05Z",
        "raw": "AQ==",
        "big": None,
    }
    assert got.state == {"when": "2026-01-02T03:04:05Z"}
    assert session.state == {"when": when}  # the session object keeps what it was given


def _allows_none(annotation: Any) -> bool:
    if annotation is type(None) or annotation is Any:
        return True
    if typing.get_origin(annotation) in (typing.Union, UnionType):
        return any(_allows_none(arg) for arg in typing.get_args(annotation))
    return False


def _models(annotation: Any) -> list[type[BaseModel]]:
    found = []
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        found.append(annotation)
    for arg in typing.get_args(annotation):
        found.extend(_models(arg))
    return found


def test_leaving_out_none_values_loses_nothing() -> None:
    """The stored form leaves out ``None`` fields (as ADK's does): that loses nothing only
    while no field of an event, however deep, defaults to something else and accepts
    ``None``. Checked on the installed ADK and genai, so an upgrade that breaks it fails
    here."""
    seen: set[type[BaseModel]] = set()
    risky = []
    pending: list[type[BaseModel]] = [Event]
    while pending:
        model = pending.pop()
        if model in seen:
            continue
        seen.add(model)
        for name, field in model.model_fields.items():
            default_set = field.default_factory is not None or field.default not in (
                None,
                PydanticUndefined,
            )
            if _allows_none(field.annotation) and default_set:
                risky.append(f"{model.__name__}.{name}")
            pending.extend(_models(field.annotation))
    assert len(seen) > 20 and risky == []


# -- chatkeep readers -------------------------------------------------------------------------


@pytest.mark.anyio
async def test_events_read_as_chatkeep_messages(chatkeep_service: ChatkeepSessionService) -> None:
    """Role, author and text (and tool calls, results, files) for chatkeep's readers: the
    CLI's ``sessions show``, export and search read ADK sessions like any other."""
    service = chatkeep_service
    session = await service.create_session(app_name=APP, user_id="u", state={"k": 1})
    call = types.FunctionCall(id="c1", name="weather", args={"city": "Oslo"})
    response = types.FunctionResponse(id="c1", name="weather", response={"forecast": "sun"})
    for sent in (
        Event(author="user", content=types.Content(role="user", parts=[types.Part(text="Hi")])),
        Event(
            author="bot",
            content=types.Content(role="model", parts=[types.Part(function_call=call)]),
        ),
        Event(
            author="bot",
            content=types.Content(role="user", parts=[types.Part(function_response=response)]),
        ),
        Event(author="bot", content=types.Content(role="model", parts=[types.Part(text="Sunny.")])),
        Event(author="bot", actions=EventActions(state_delta={"k": 2})),
    ):
        await service.append_event(session, sent)
    key = session_keys(APP, "u", session.id).session
    view = read_view(service.store, key)
    assert [(m.role, m.author_name, m.text) for m in view] == [
        ("user", "user", "Hi"),
        ("assistant", "bot", ""),
        ("tool", "bot", ""),
        ("assistant", "bot", "Sunny."),
        ("assistant", "bot", ""),
    ]
    assert view[1].contents[0].name == "weather"  # type: ignore[union-attr]
    assert view[2].contents[0].result == {"forecast": "sun"}  # type: ignore[union-attr]
    log = read_log(service.store, key)
    assert [entry.kind for entry in log] == ["chatkeep.state"] + ["message"] * 5
    assert all(entry.stored_at is not None for entry in log)
    from chatkeep.core.metadata import describe_session

    info = describe_session(service.store, key)
    assert info.messages == 5 and info.messages_exact and info.created_at is not None


@pytest.mark.anyio
async def test_the_cli_shows_and_migrate_moves_adk_sessions(
    tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """``chatkeep sessions show`` prints the conversation; ``chatkeep.core.migrate`` moves
    a store's ADK sessions, state and all, and the service reads them at the new place."""
    from chatkeep.cli.main import main
    from chatkeep.core import migrate

    source_url = f"sqlite:///{tmp_path / 'from.db'}"
    service = ChatkeepSessionService(url=source_url)
    session = await service.create_session(
        app_name=APP, user_id="u", session_id="s1", state={"k": 1, "user:name": "Ada"}
    )
    for author, role, text in (("user", "user", "Hello"), ("bot", "model", "Hi Ada.")):
        content = types.Content(role=role, parts=[types.Part(text=text)])
        await service.append_event(session, Event(author=author, content=content))
    await service.close()

    key = session_keys(APP, "u", "s1").session
    assert main(["sessions", "show", "--url", source_url, key]) == 0
    shown = capsys.readouterr().out
    assert "2 messages" in shown and "Hello" in shown and "Hi Ada." in shown

    source, destination = open_store(source_url), open_store("memory://")
    migrate(source, destination)
    moved = ChatkeepSessionService(store=destination)
    got = await moved.get_session(app_name=APP, user_id="u", session_id="s1")
    assert got == session
    source.close()


def test_the_stored_form_opens_with_the_message_head() -> None:
    """Records begin like the codec's (``{"type":"message"``), so chatkeep's fast paths
    decode them, and carry no field the codec would refuse."""
    from chatkeep.core import decode_message
    from chatkeep.google_adk.records import Tail, event_record

    tail = Tail("r0", 0, 1.0, 0, "r0", True, None)
    record, after = event_record(
        "r1", adk_round_trip(everything()).model_dump(mode="json", exclude_none=True), tail, None
    )
    assert record.data.startswith(b'{"type":"message"')
    message = decode_message(record.data)
    assert message.message_id == "r1" and message.role == "assistant"
    assert after.position == 1 and after.state_id == "r0"
