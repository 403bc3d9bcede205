"""MAF ``Message.to_dict()`` -> chatkeep -> MAF ``Message.from_dict()`` loses nothing.

For every MAF content type (Hypothesis builds them with MAF's own constructors), a message
that goes through chatkeep's codec, as bytes in a store, comes back as MAF's own dict round
trip gives it (``Message.from_dict(m.to_dict())``: what MAF's stores keep), and the JSON
chatkeep wrote is MAF's dict itself (only empty per-content ``additional_properties`` are
left out) and strict JSON (non-finite floats tagged).
"""

from __future__ import annotations

import json
import math
from typing import Any

from agent_framework import Content
from agent_framework import Message as MafMessage
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chatkeep.agent_framework.convert import FRAMEWORK_MESSAGE_ID, to_maf, to_record
from chatkeep.core import decode_message, encode_message, message_from_dict, message_to_dict
from chatkeep.core.codec import MARKER
from chatkeep.testing import example_count

# -- strategies: MAF values -----------------------------------------------------------------

names = st.text(min_size=1, max_size=12)
texts = st.one_of(st.text(max_size=40), st.text(alphabet=st.characters(min_codepoint=0x10000)))
json_leaves = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(), texts
)  # floats: NaN and infinities included
json_values = st.recursive(
    json_leaves,
    lambda children: st.one_of(
        st.lists(children, max_size=3), st.dictionaries(st.text(max_size=8), children, max_size=3)
    ),
    max_leaves=8,
)
# MAF interprets a few property names (a legacy server_label turns a call into a hosted
# one); everything else is the application's.
property_names = st.one_of(
    st.text(max_size=8), st.sampled_from(["_attribution", MARKER, "value", "type"])
).filter(lambda name: name != "server_label")
properties = st.dictionaries(property_names, json_values, max_size=3)
optional = st.none().__or__
annotations = st.none() | st.lists(
    st.fixed_dictionaries(
        {"type": st.just("citation")},
        optional={
            "title": texts,
            "url": texts,
            "file_id": names,
            "tool_name": names,
            "snippet": texts,
            "annotated_regions": st.lists(
                st.fixed_dictionaries(
                    {
                        "type": st.just("text_span"),
                        "start_index": st.integers(0, 500),
                        "end_index": st.integers(0, 500),
                    }
                ),
                max_size=2,
            ),
            "additional_properties": properties,
        },
    ),
    max_size=2,
)
media_types = st.sampled_from(["image/png", "audio/wav", "application/pdf", "text/plain"])
arguments = st.none() | texts | st.dictionaries(st.text(max_size=8), json_values, max_size=3)

function_calls = st.builds(
    Content.from_function_call,
    names,
    names,
    arguments=arguments,
    informational_only=st.booleans(),
    id=optional(names),
    hosted=optional(st.booleans()),
    status=optional(names),
    annotations=annotations,
    additional_properties=properties,
)
texts_contents = st.builds(
    Content.from_text, texts, annotations=annotations, additional_properties=properties
)
contents = st.one_of(
    texts_contents,
    function_calls,
    # MAF's constructor: a text or a list of contents becomes items (result is their text)
    st.builds(
        Content.from_function_result,
        names,
        result=st.none() | texts | json_values | st.lists(texts_contents, max_size=2),
        exception=optional(texts),
        status=optional(names),
        id=optional(names),
        annotations=annotations,
        additional_properties=properties,
    ),
    # a result kept as JSON (older MAF, chatkeep's own tool loop), with an exception
    st.builds(
        lambda call_id, result, exception, properties: Content(
            "function_result",
            call_id=call_id,
            result=result,
            exception=exception,
            additional_properties=properties,
        ),
        names,
        json_values,
        optional(texts),
        properties,
    ),
    st.builds(
        Content.from_data,
        st.binary(max_size=64),
        media_types,
        name=optional(names),
        file_id=optional(names),
        annotations=annotations,
        additional_properties=properties,
    ),
    st.builds(
        Content.from_uri,
        st.sampled_from(["https://example.com/a.png", "s3://bucket/key.pdf", "file:///tmp/x"]),
        media_type=optional(media_types),
        name=optional(names),
        additional_properties=properties,
    ),
    # a data URI MAF builds from a string, with parameters it leaves out of media_type
    st.builds(
        lambda payload: Content.from_uri(f"data:text/plain;charset=utf-8;base64,{payload}"),
        st.sampled_from(["aGk=", "", "SGVsbG8sIFdvcmxkIQ=="]),
    ),
    st.builds(
        Content.from_hosted_file,
        names,
        media_type=optional(media_types),
        name=optional(names),
        additional_properties=properties,
    ),
    st.builds(
        Content.from_usage,
        st.fixed_dictionaries(
            {},
            optional={
                "input_token_count": st.integers(0, 10**6),
                "output_token_count": st.integers(0, 10**6),
                "total_token_count": st.integers(0, 10**6),
                "reasoning_output_token_count": st.integers(0, 10**6),
            },
        ),
        additional_properties=properties,
    ),
    st.builds(
        Content.from_error,
        message=optional(texts),
        error_code=optional(names),
        error_details=optional(texts),
        additional_properties=properties,
    ),
    st.builds(
        Content.from_text_reasoning,
        id=optional(names),
        text=optional(texts),
        protected_data=optional(texts),
        status=optional(names),
        additional_properties=properties,
    ),
    st.builds(
        Content.from_function_approval_request,
        names,
        function_calls.filter(lambda call: call.id is None or call.hosted),
    ),
    st.builds(
        Content.from_function_approval_response,
        st.booleans(),
        names,
        function_calls,
    ),
)
maf_messages = st.builds(
    MafMessage,
    st.sampled_from(["user", "assistant", "system", "tool"]) | names,
    st.lists(contents, max_size=4),
    author_name=optional(names),
    message_id=optional(names),
    additional_properties=properties,
)

# -- helpers --------------------------------------------------------------------------------


def canonical(message: MafMessage) -> str:
    """Everything MAF compares (and more: ``None`` fields, exception text), as JSON text,
    so NaN compares equal to NaN."""
    view = {
        "role": message.role,
        "author_name": message.author_name,
        "message_id": message.message_id,
        "additional_properties": message.additional_properties,
        "contents": [
            content._to_dict(exclude_none=False, redact_exception=False)
            for content in message.contents
        ],
    }
    return json.dumps(view, sort_keys=True, default=repr)


def strict_loads(data: bytes) -> Any:
    def refuse(token: str) -> Any:
        raise AssertionError(f"chatkeep wrote the non-JSON token {token}")

    return json.loads(data, parse_constant=refuse)


#: The content types chatkeep models (it leaves their empty additional_properties out).
MODELED = {"text", "function_call", "function_result", "data", "uri", "text_reasoning"}


def without_empty_content_properties(raw: dict[str, Any]) -> dict[str, Any]:
    contents = []
    for item in raw["contents"]:
        item = dict(item)
        if item["type"] in MODELED and item.get("additional_properties") == {}:
            del item["additional_properties"]
        contents.append(item)
    return {**raw, "contents": contents}


SETTINGS = settings(
    max_examples=example_count(300),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)

# -- the properties -------------------------------------------------------------------------


@SETTINGS
@given(maf_messages)
def test_maf_dict_through_the_codec_is_mafs_own_round_trip(message: MafMessage) -> None:
    maf_dict = message.to_dict()
    stored = encode_message(message_from_dict(maf_dict, tagged=False))
    # What is stored is MAF's dict itself, as strict JSON.
    written = strict_loads(stored)
    expected_json = json.loads(json.dumps(without_empty_content_properties(maf_dict)))
    assert canonical_json(written) == canonical_json(expected_json)
    back = MafMessage.from_dict(message_to_dict(decode_message(stored), tagged=False))
    assert canonical(back) == canonical(MafMessage.from_dict(maf_dict))


def canonical_json(value: Any) -> str:
    """JSON text with the tagged non-finite floats of chatkeep's output written as MAF's
    ``NaN``/``Infinity`` tokens, so the two documents compare."""

    def untag(item: Any) -> Any:
        if isinstance(item, dict):
            if set(item) == {MARKER, "value"} and item[MARKER] == "float":
                return float(item["value"])
            if set(item) == {MARKER, "value"} and item[MARKER] == "dict":
                return {key: untag(v) for key, v in item["value"].items()}
            return {key: untag(v) for key, v in item.items()}
        if isinstance(item, list):
            return [untag(v) for v in item]
        return item

    return json.dumps(untag(value), sort_keys=True)


@SETTINGS
@given(maf_messages)
def test_the_adapters_conversion_keeps_mafs_message_and_its_id(message: MafMessage) -> None:
    record = to_record(message)
    stored = decode_message(record.data)
    assert stored.message_id == record.id  # the record id is chatkeep's own
    if message.message_id is not None:
        assert stored.extra[FRAMEWORK_MESSAGE_ID] == message.message_id
        assert record.id != message.message_id
    back = to_maf(stored)
    expected = MafMessage.from_dict(message.to_dict())
    if message.message_id is None:
        assert back.message_id == record.id  # an id is assigned where MAF left none
        expected.message_id = record.id
    assert canonical(back) == canonical(expected)


def test_every_listed_content_type_is_generated() -> None:
    # The strategy above must keep covering the content types issue 12 lists.
    seen: set[str] = set()

    @settings(max_examples=example_count(400), deadline=None, database=None)
    @given(contents)
    def collect(content: Content) -> None:
        seen.add(content.type)

    collect()
    assert seen >= {
        "text",
        "function_call",
        "function_result",
        "data",
        "uri",
        "hosted_file",
        "usage",
        "error",
        "text_reasoning",
        "function_approval_request",
        "function_approval_response",
    }


def test_a_literal_maf_message_keeps_every_field() -> None:
    call = Content.from_function_call("c1", "get_weather", arguments={"city": "Oslo"})
    message = MafMessage(
        "assistant",
        [
            Content.from_text(
                "Cold [1]",
                annotations=[{"type": "citation", "url": "https://met.no", "title": "MET"}],
            ),
            call,
            Content.from_function_result("c1", result=[Content.from_text("-3 C")], status="ok"),
            Content.from_data(b"\x89PNG", "image/png", name="chart.png"),
            Content.from_function_approval_request("r1", call),
        ],
        message_id="msg_1",
        additional_properties={"score": math.nan, "cost": math.inf},
    )
    stored = decode_message(to_record(message).data)
    text, call_back, result, data, approval = stored.contents
    assert text.extra["annotations"] == [
        {"type": "citation", "url": "https://met.no", "title": "MET"}
    ]  # type: ignore[union-attr]
    assert call_back.extra == {"hosted": False}  # type: ignore[union-attr]
    assert result.extra["items"] == [  # type: ignore[union-attr]
        {"type": "text", "text": "-3 C", "additional_properties": {}}
    ]
    assert result.extra["status"] == "ok"  # type: ignore[union-attr]
    assert data.extra == {"name": "chart.png"}  # type: ignore[union-attr]
    assert approval.type == "function_approval_request"
    back = to_maf(stored)
    assert back.message_id == "msg_1"
    assert math.isnan(back.additional_properties["score"])
    assert back.additional_properties["cost"] == math.inf
    assert back.contents[0].annotations == [
        {"type": "citation", "url": "https://met.no", "title": "MET"}
    ]
    assert back.contents[2].items is not None
    assert back.contents[2].items[0].text == "-3 C"
    assert back.contents[3].name == "chart.png"
    assert back.contents[4].function_call is not None
    assert back.contents[4].function_call.name == "get_weather"
