"""Function tools: plain Python callables the model can call.

:meth:`Tool.from_function` (or the :func:`tool` decorator) derives the tool's JSON schema
from the function's type hints and its description from the docstring::

    @tool
    def weather(city: str, unit: Literal["C", "F"] = "C") -> str:
        \"\"\"Today's weather in a city.

        Args:
            city: The city's name.
            unit: Celsius or Fahrenheit.
        \"\"\"
        return f"sunny, 21°{unit} in {city}"

    weather.parameters
    # {"type": "object", "properties": {"city": {"type": "string", "description": ...},
    #  "unit": {"enum": ["C", "F"], "type": "string", ...}}, "required": ["city"]}

Sync and ``async def`` functions both work; a sync tool runs on the event loop's thread,
so make slow tools ``async``.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import inspect
import json
import re
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, Union, get_args, get_origin, overload

from .errors import ToolError

__all__ = ["Tool", "ToolError", "json_schema", "tool"]

_JSON_TYPES: dict[type, str] = {
    str: "string",
    int: "integer",
    float: "number",
    bool: "boolean",
    type(None): "null",
}


def _literal_schema(values: tuple[Any, ...]) -> dict[str, Any]:
    schema: dict[str, Any] = {"enum": list(values)}
    kinds = {_JSON_TYPES.get(type(value)) for value in values}
    if len(kinds) == 1 and None not in kinds:
        schema["type"] = kinds.pop()
    return schema


def _object_schema(fields: Mapping[str, Any], required: Sequence[str]) -> dict[str, Any]:
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {name: json_schema(hint) for name, hint in fields.items()},
    }
    if required:
        schema["required"] = list(required)
    return schema


def json_schema(annotation: Any) -> dict[str, Any]:
    """The JSON schema of a type hint (``str``, ``int``, ``list[float]``, ``Literal``,
    ``Enum``, ``X | None``, dataclasses, ``TypedDict``, ``Annotated[X, "description"]``).
    Unknown or missing hints give ``{}`` (any value)."""
    if annotation is inspect.Parameter.empty or annotation is Any:
        return {}
    origin = get_origin(annotation)
    if origin is typing.Annotated:
        base, *extras = get_args(annotation)
        schema = json_schema(base)
        notes = [extra for extra in extras if isinstance(extra, str)]
        if notes:
            schema["description"] = " ".join(notes)
        return schema
    if annotation in _JSON_TYPES:
        return {"type": _JSON_TYPES[annotation]}
    if origin is Literal:
        return _literal_schema(get_args(annotation))
    if origin is Union or origin is types.UnionType:
        options = [json_schema(arg) for arg in get_args(annotation)]
        return {"anyOf": options}
    if origin in (list, tuple, set, frozenset) or origin in (Sequence, typing.Sequence):
        args = [a for a in get_args(annotation) if a is not Ellipsis]
        array: dict[str, Any] = {"type": "array"}
        if (
            origin is tuple
            and len(get_args(annotation)) > 1
            and Ellipsis not in get_args(annotation)
        ):
            array["prefixItems"] = [json_schema(a) for a in args]
            array["minItems"] = array["maxItems"] = len(args)
        elif args:
            array["items"] = json_schema(args[0])
        if origin in (set, frozenset):
            array["uniqueItems"] = True
        return array
    if origin in (dict, Mapping) or annotation in (dict, Mapping):
        pair = get_args(annotation)
        mapping: dict[str, Any] = {"type": "object"}
        if len(pair) == 2:
            mapping["additionalProperties"] = json_schema(pair[1])
        return mapping
    if annotation in (list, tuple, set, frozenset):
        return {"type": "array"}
    if isinstance(annotation, type):
        if issubclass(annotation, enum.Enum):
            return _literal_schema(tuple(member.value for member in annotation))
        if issubclass(annotation, dt.datetime):
            return {"type": "string", "format": "date-time"}
        if issubclass(annotation, dt.date):
            return {"type": "string", "format": "date"}
        if dataclasses.is_dataclass(annotation):
            hints = typing.get_type_hints(annotation, include_extras=True)
            names = [f.name for f in dataclasses.fields(annotation)]
            required = [
                f.name
                for f in dataclasses.fields(annotation)
                if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
            ]
            return _object_schema({name: hints.get(name, Any) for name in names}, required)
        if typing.is_typeddict(annotation):
            hints = typing.get_type_hints(annotation, include_extras=True)
            required_keys = getattr(annotation, "__required_keys__", frozenset(hints))
            return _object_schema(hints, [k for k in hints if k in required_keys])
        model_schema = getattr(annotation, "model_json_schema", None)  # pydantic, duck-typed
        if callable(model_schema):
            result: dict[str, Any] = model_schema()
            return result
    return {}


_SECTION = re.compile(r"^\s*(Args|Arguments|Parameters)\s*:\s*$")
_ARG_LINE = re.compile(r"^\s*(\*{0,2}\w+)\s*(\([^)]*\))?\s*:\s*(.*)$")
_SPHINX = re.compile(r"^\s*:param\s+(?:[^:]*\s)?(\w+)\s*:\s*(.*)$")


def _parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """The summary (first paragraph) and per-parameter descriptions (Google or Sphinx)."""
    if not doc:
        return "", {}
    lines = inspect.cleandoc(doc).splitlines()
    summary: list[str] = []
    for line in lines:
        if not line.strip() or _SECTION.match(line) or line.strip().startswith(":"):
            break
        summary.append(line.strip())
    params: dict[str, str] = {}
    in_args = False
    current: str | None = None
    for line in lines:
        sphinx = _SPHINX.match(line)
        if sphinx:
            params[sphinx.group(1)] = sphinx.group(2).strip()
            continue
        if _SECTION.match(line):
            in_args, current = True, None
            continue
        if in_args:
            if line and not line[0].isspace() and line.rstrip().endswith(":"):
                in_args = False  # the next section (Returns:, Raises:)
                continue
            match = _ARG_LINE.match(line)
            if match and line.startswith((" ", "\t")) and len(line) - len(line.lstrip()) <= 8:
                current = match.group(1).lstrip("*")
                params[current] = match.group(3).strip()
            elif current and line.strip():
                params[current] = (params[current] + " " + line.strip()).strip()
    return " ".join(summary), params


def _convert(value: Any, annotation: Any) -> Any:
    """Turn a JSON argument into the hinted type where that is unambiguous (enums,
    dataclasses, dates); everything else is passed through."""
    if get_origin(annotation) is typing.Annotated:
        annotation = get_args(annotation)[0]
    if get_origin(annotation) in (Union, types.UnionType):
        options = [a for a in get_args(annotation) if a is not type(None)]
        if value is None or len(options) != 1:
            return value
        annotation = options[0]
    if isinstance(annotation, type):
        if issubclass(annotation, enum.Enum) and not isinstance(value, annotation):
            return annotation(value)
        if issubclass(annotation, dt.datetime) and isinstance(value, str):
            return dt.datetime.fromisoformat(value)
        if issubclass(annotation, dt.date) and isinstance(value, str):
            return dt.date.fromisoformat(value)
        if dataclasses.is_dataclass(annotation) and isinstance(value, Mapping):
            hints = typing.get_type_hints(annotation)
            return annotation(**{k: _convert(v, hints.get(k, Any)) for k, v in value.items()})
        if annotation is float and isinstance(value, int) and not isinstance(value, bool):
            return float(value)
    return value


@dataclasses.dataclass
class Tool:
    """A function the model may call: ``name``, ``description``, JSON-schema
    ``parameters`` and the Python ``function`` that runs it."""

    name: str
    description: str
    parameters: dict[str, Any]
    function: Callable[..., Any] = dataclasses.field(repr=False)
    _hints: dict[str, Any] = dataclasses.field(default_factory=dict, repr=False, compare=False)
    _accepts_any: bool = dataclasses.field(default=False, repr=False, compare=False)

    @classmethod
    def from_function(
        cls,
        function: Callable[..., Any] | Tool,
        *,
        name: str | None = None,
        description: str | None = None,
    ) -> Tool:
        """A tool for ``function``: its name, its docstring's summary as the description,
        and a schema of its parameters from their type hints (parameters without a default
        are required; ``*args`` are not supported)."""
        if isinstance(function, Tool):
            if name is None and description is None:
                return function
            return dataclasses.replace(
                function,
                name=name or function.name,
                description=function.description if description is None else description,
            )
        if not callable(function):
            raise TypeError(f"a tool needs a callable, not {type(function).__name__}")
        signature = inspect.signature(function)
        try:
            hints = typing.get_type_hints(function, include_extras=True)
        except Exception:  # unresolvable forward references: fall back to raw annotations
            hints = {}
        summary, documented = _parse_docstring(inspect.getdoc(function))
        properties: dict[str, Any] = {}
        required: list[str] = []
        accepts_any = False
        for parameter in signature.parameters.values():
            if parameter.kind is inspect.Parameter.VAR_POSITIONAL:
                raise TypeError(f"tool {function.__name__!r}: *{parameter.name} is not supported")
            if parameter.kind is inspect.Parameter.VAR_KEYWORD:
                accepts_any = True
                continue
            if parameter.kind is inspect.Parameter.POSITIONAL_ONLY:
                raise TypeError(
                    f"tool {function.__name__!r}: positional-only {parameter.name!r} cannot "
                    "be passed by name"
                )
            hint = hints.get(parameter.name, parameter.annotation)
            schema = json_schema(hint)
            if parameter.name in documented and "description" not in schema:
                schema["description"] = documented[parameter.name]
            if parameter.default is inspect.Parameter.empty:
                required.append(parameter.name)
            elif parameter.default is None or isinstance(
                parameter.default, (str, int, float, bool)
            ):
                schema["default"] = parameter.default
            properties[parameter.name] = schema
        parameters: dict[str, Any] = {"type": "object", "properties": properties}
        if required:
            parameters["required"] = required
        if not accepts_any:
            parameters["additionalProperties"] = False
        tool_name = name or getattr(function, "__name__", None) or type(function).__name__
        return cls(
            name=tool_name,
            description=description if description is not None else summary,
            parameters=parameters,
            function=function,
            _hints={k: v for k, v in hints.items() if k != "return"},
            _accepts_any=accepts_any,
        )

    def to_dict(self) -> dict[str, Any]:
        """The tool as a model service expects it (``name``, ``description``,
        ``parameters``)."""
        return {
            "type": "function",
            "name": self.name,
            "description": self.description,
            "parameters": self.parameters,
        }

    def _arguments(self, arguments: str | Mapping[str, Any] | None) -> dict[str, Any]:
        if arguments is None or arguments == "":
            parsed: Any = {}
        elif isinstance(arguments, str):
            try:
                parsed = json.loads(arguments)
            except json.JSONDecodeError as exc:
                raise ToolError(f"arguments are not valid JSON: {exc}") from None
        else:
            parsed = dict(arguments)
        if not isinstance(parsed, dict):
            raise ToolError("arguments must be a JSON object")
        properties = self.parameters.get("properties", {})
        unknown = sorted(set(parsed) - set(properties))
        if unknown and not self._accepts_any:
            raise ToolError(f"unknown arguments: {', '.join(unknown)}")
        missing = [n for n in self.parameters.get("required", ()) if n not in parsed]
        if missing:
            raise ToolError(f"missing required arguments: {', '.join(missing)}")
        try:
            return {k: _convert(v, self._hints.get(k, Any)) for k, v in parsed.items()}
        except (TypeError, ValueError) as exc:
            raise ToolError(f"invalid argument: {exc}") from None

    async def invoke(self, arguments: str | Mapping[str, Any] | None = None) -> Any:
        """Call the function with ``arguments`` (a JSON string or a mapping) and return its
        result (awaited if it is a coroutine). Raises :class:`ToolError` for bad arguments;
        the function's own exceptions propagate."""
        result = self.function(**self._arguments(arguments))
        if inspect.isawaitable(result):
            result = await result
        return result


@overload
def tool(function: Callable[..., Any], /) -> Tool: ...
@overload
def tool(
    *, name: str | None = None, description: str | None = None
) -> Callable[[Callable[..., Any]], Tool]: ...


def tool(
    function: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Decorator: ``@tool`` or ``@tool(name=..., description=...)`` turns a function into
    a :class:`Tool` (see :meth:`Tool.from_function`)."""
    if function is not None:
        return Tool.from_function(function, name=name, description=description)

    def decorate(inner: Callable[..., Any]) -> Tool:
        return Tool.from_function(inner, name=name, description=description)

    return decorate
