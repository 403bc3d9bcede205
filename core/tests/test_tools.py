"""Function tools: schemas from type hints, descriptions from docstrings, invocation."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import enum
from typing import Annotated, Any, Literal, TypedDict

import pytest

from chatkeep.core import Tool, ToolError, tool
from chatkeep.core.tools import json_schema


class Unit(enum.Enum):
    CELSIUS = "C"
    FAHRENHEIT = "F"


@dataclasses.dataclass
class Place:
    city: str
    country: str = "NO"


class Window(TypedDict):
    start: int
    end: int


def forecast(
    place: Place,
    days: int,
    unit: Unit = Unit.CELSIUS,
    hours: list[int] | None = None,
    mood: Literal["sunny", "any"] = "any",
    note: Annotated[str, "free text"] = "",
) -> str:
    """The forecast for a place.

    Longer text that is not the summary.

    Args:
        place: Where.
        days: How many days,
            at most 10.
        unit: The unit.

    Returns:
        A sentence.
    """
    return f"{place.city}/{place.country} {days}d {unit.value} {hours} {mood} {note}"


def test_schema_from_type_hints_and_docstring() -> None:
    made = Tool.from_function(forecast)
    assert made.name == "forecast"
    assert made.description == "The forecast for a place."
    props = made.parameters["properties"]
    assert made.parameters["required"] == ["place", "days"]
    assert made.parameters["additionalProperties"] is False
    assert props["place"] == {
        "type": "object",
        "properties": {"city": {"type": "string"}, "country": {"type": "string"}},
        "required": ["city"],
        "description": "Where.",
    }
    assert props["days"] == {"type": "integer", "description": "How many days, at most 10."}
    assert props["unit"]["enum"] == ["C", "F"] and props["unit"]["type"] == "string"
    assert props["hours"]["anyOf"] == [
        {"type": "array", "items": {"type": "integer"}},
        {"type": "null"},
    ]
    assert props["mood"]["enum"] == ["sunny", "any"] and props["mood"]["default"] == "any"
    assert props["note"]["description"] == "free text"
    assert made.to_dict()["type"] == "function"


@pytest.mark.parametrize(
    ("hint", "schema"),
    [
        (str, {"type": "string"}),
        (float, {"type": "number"}),
        (bool, {"type": "boolean"}),
        (Any, {}),
        (dict[str, int], {"type": "object", "additionalProperties": {"type": "integer"}}),
        (
            tuple[int, str],
            {
                "type": "array",
                "prefixItems": [{"type": "integer"}, {"type": "string"}],
                "minItems": 2,
                "maxItems": 2,
            },
        ),
        (set[str], {"type": "array", "items": {"type": "string"}, "uniqueItems": True}),
        (dt.datetime, {"type": "string", "format": "date-time"}),
        (dt.date, {"type": "string", "format": "date"}),
        (
            Window,
            {
                "type": "object",
                "properties": {"start": {"type": "integer"}, "end": {"type": "integer"}},
                "required": ["start", "end"],
            },
        ),
    ],
)
def test_json_schema_of_hints(hint: Any, schema: dict[str, Any]) -> None:
    assert json_schema(hint) == schema


def test_invoke_converts_and_validates() -> None:
    made = Tool.from_function(forecast)
    result = asyncio.run(made.invoke('{"place": {"city": "Oslo"}, "days": 2, "unit": "F"}'))
    assert result == "Oslo/NO 2d F None any "
    for bad, message in [
        ('{"days": 2}', "missing required arguments: place"),
        ('{"place": {"city": "x"}, "days": 1, "wind": 3}', "unknown arguments: wind"),
        ("not json", "not valid JSON"),
        ("[1, 2]", "must be a JSON object"),
        ('{"place": {"city": "x"}, "days": 1, "unit": "K"}', "invalid argument"),
    ]:
        with pytest.raises(ToolError, match=message):
            asyncio.run(made.invoke(bad))


def test_async_functions_and_the_decorator() -> None:
    @tool
    async def add(a: int, b: int = 1) -> int:
        """:param a: the first number
        :param b: the second number"""
        return a + b

    assert isinstance(add, Tool)
    assert add.parameters["properties"]["a"]["description"] == "the first number"
    assert asyncio.run(add.invoke({"a": 2})) == 3

    @tool(name="shout", description="Upper-cases text.")
    def upper(text: str) -> str:
        return text.upper()

    assert (upper.name, upper.description) == ("shout", "Upper-cases text.")
    assert asyncio.run(upper.invoke({"text": "hi"})) == "HI"
    renamed = Tool.from_function(upper, name="yell")
    assert renamed.name == "yell" and Tool.from_function(upper) is upper


def test_kwargs_accept_anything_and_args_are_refused() -> None:
    def flexible(x: int, **extra: Any) -> dict[str, Any]:
        return {"x": x, **extra}

    made = Tool.from_function(flexible)
    assert "additionalProperties" not in made.parameters
    assert asyncio.run(made.invoke({"x": 1, "y": 2})) == {"x": 1, "y": 2}

    def variadic(*values: int) -> int:
        return sum(values)

    with pytest.raises(TypeError, match="not supported"):
        Tool.from_function(variadic)
    with pytest.raises(TypeError):
        Tool.from_function(42)  # type: ignore[arg-type]


def test_no_arguments_and_empty_input() -> None:
    def now() -> str:
        """The time."""
        return "noon"

    made = Tool.from_function(now)
    assert made.parameters == {"type": "object", "properties": {}, "additionalProperties": False}
    assert asyncio.run(made.invoke("")) == "noon"
    assert asyncio.run(made.invoke(None)) == "noon"
