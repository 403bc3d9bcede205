"""Sessions and their state: :class:`AgentSession`, :class:`StateBag`,
:class:`ProviderSessionState`.

A session is the handle of one conversation: its ``session_id`` (the key of its log in a
store), the service's ``conversation_id`` when the model service keeps the history, and a
:class:`StateBag` where providers keep whatever per-session data they need. Providers keep
nothing per session in their own fields, so one provider serves any number of sessions.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar, cast, overload

from .codec import message_from_dict, message_to_dict
from .ids import new_id
from .messages import Message

__all__ = [
    "AgentSession",
    "ProviderSessionState",
    "StateBag",
    "StateSerializer",
    "register_state_type",
]

T = TypeVar("T")
_MISSING: Any = object()
_TYPE_KEY = "$type"
#: The ``$type`` of a value a slot serialized with its own :class:`StateSerializer`.
_SLOT_TYPE = "chatkeep.slot"


@dataclass(frozen=True)
class StateSerializer(Generic[T]):
    """How one state slot's value becomes JSON data and back, without registering its type
    process-wide (:func:`register_state_type`); the slot's own serializer options::

        prefs = StateSerializer(
            to_json=lambda p: {"language": p.language},
            from_json=lambda data: Preferences(**data),
        )
        slot = ProviderSessionState("prefs", lambda s: Preferences("en"), serializer=prefs)

    ``to_json`` must return JSON data (dicts with ``str`` keys, lists, str, numbers, bools,
    ``None``); ``from_json`` receives exactly that back.
    """

    to_json: Callable[[T], Any]
    from_json: Callable[[Any], T]


class _Encoded:
    """A slot's JSON form read by :meth:`StateBag.from_dict`, kept until the slot's own
    serializer decodes it (the bag alone cannot)."""

    __slots__ = ("data",)

    def __init__(self, data: Any) -> None:
        self.data = data

    def __deepcopy__(self, memo: dict[int, Any]) -> _Encoded:
        return _Encoded(copy.deepcopy(self.data, memo))


@dataclass(frozen=True)
class _StateType:
    name: str
    cls: type[Any]
    to_json: Callable[[Any], Any]
    from_json: Callable[[Any], Any]


_types_by_name: dict[str, _StateType] = {}
_types_by_class: dict[type[Any], _StateType] = {}
_types_lock = threading.Lock()


def _call_to_dict(value: Any) -> Any:
    return value.to_dict()


def register_state_type(
    cls: type[T],
    *,
    name: str | None = None,
    to_json: Callable[[T], Any] | None = None,
    from_json: Callable[[Any], T] | None = None,
) -> type[T]:
    """Let values of ``cls`` be stored in a :class:`StateBag` and survive serialization.

    By default uses ``value.to_dict()`` and ``cls.from_dict(data)``. Usable as a decorator::

        @register_state_type
        @dataclass
        class Preferences:
            language: str
            def to_dict(self): return {"language": self.language}
            @classmethod
            def from_dict(cls, data): return cls(**data)
    """
    type_name = name or f"{cls.__module__}.{cls.__qualname__}"
    encode: Callable[[Any], Any] = to_json or _call_to_dict
    decode = from_json or getattr(cls, "from_dict", None)
    if decode is None:
        raise TypeError(f"{cls.__name__} needs from_dict() or a from_json= function")
    entry = _StateType(type_name, cls, encode, decode)
    with _types_lock:
        _types_by_name[type_name] = entry
        _types_by_class[cls] = entry
    return cls


register_state_type(
    Message, name="chatkeep.Message", to_json=message_to_dict, from_json=message_from_dict
)


def _to_json(value: Any) -> Any:
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    entry = _types_by_class.get(type(value))
    if entry is not None:
        return {_TYPE_KEY: entry.name, "value": entry.to_json(value)}
    if isinstance(value, Mapping):
        out = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise TypeError(f"state dict keys must be str, not {key!r}")
            out[key] = _to_json(item)
        if _TYPE_KEY in out:  # a user dict that happens to use the marker key
            return {_TYPE_KEY: "dict", "value": out}
        return out
    if isinstance(value, (list, tuple)):
        return [_to_json(item) for item in value]
    raise TypeError(
        f"cannot serialize a {type(value).__name__} in session state; "
        "register it with chatkeep.core.register_state_type"
    )


def _from_json(value: Any) -> Any:
    if isinstance(value, list):
        return [_from_json(item) for item in value]
    if not isinstance(value, dict):
        return value
    type_name = value.get(_TYPE_KEY)
    if type_name is None:
        return {key: _from_json(item) for key, item in value.items()}
    if type_name == "dict":
        return {key: _from_json(item) for key, item in value["value"].items()}
    if type_name == _SLOT_TYPE:
        return _Encoded(value["value"])
    entry = _types_by_name.get(type_name)
    if entry is None:
        raise TypeError(
            f"session state holds a {type_name!r} that is not registered in this process; "
            "call register_state_type for it before deserializing"
        )
    return entry.from_json(value["value"])


class StateBag:
    """A thread-safe key/value container that serializes to JSON and back.

    Values are JSON data or instances of types registered with :func:`register_state_type`
    (messages are registered already), or of any type when the value is set with its own
    :class:`StateSerializer`::

        bag = StateBag()
        bag.set("count", 1)
        bag.get("count", int)            # 1, checked to be an int
        bag.try_get("missing", int)      # None
        StateBag.from_dict(bag.to_dict()) == bag

    A value set with ``serializer=`` is written with it by :meth:`to_dict`; after
    :meth:`from_dict` it stays in its JSON form (and reads as that JSON) until it is read
    with the same serializer, which decodes it once.
    """

    __slots__ = ("_data", "_lock", "_serializers")

    def __init__(self, data: Mapping[str, Any] | None = None) -> None:
        self._lock = threading.RLock()
        self._data: dict[str, Any] = dict(data or {})
        self._serializers: dict[str, StateSerializer[Any]] = {}

    def _value(self, key: str, serializer: StateSerializer[Any] | None) -> Any:
        """The stored value (decoded with ``serializer`` if it is still encoded); call
        with the lock held."""
        value = self._data.get(key, _MISSING)
        if isinstance(value, _Encoded):
            if serializer is None:
                return value.data
            value = serializer.from_json(value.data)
            self._data[key] = value
            self._serializers[key] = serializer
        return value

    @overload
    def get(self, key: str) -> Any: ...
    @overload
    def get(
        self, key: str, type_: type[T], *, serializer: StateSerializer[T] | None = None
    ) -> T: ...
    @overload
    def get(
        self,
        key: str,
        type_: type[T],
        default: T,
        *,
        serializer: StateSerializer[T] | None = None,
    ) -> T: ...

    def get(
        self,
        key: str,
        type_: type[Any] | None = None,
        default: Any = _MISSING,
        *,
        serializer: StateSerializer[Any] | None = None,
    ) -> Any:
        """The value under ``key``; ``KeyError`` if absent and no default was given.

        With ``type_``, a stored value of another type raises ``TypeError``. ``serializer``
        decodes a value that was stored with it and is still in its JSON form.
        """
        with self._lock:
            value = self._value(key, serializer)
        if value is _MISSING:
            if default is _MISSING:
                raise KeyError(key)
            return default
        if type_ is not None and not isinstance(value, type_):
            raise TypeError(f"state {key!r} holds a {type(value).__name__}, not a {type_.__name__}")
        return value

    def try_get(
        self,
        key: str,
        type_: type[T] | None = None,
        *,
        serializer: StateSerializer[T] | None = None,
    ) -> T | None:
        """The value under ``key`` if present (and of ``type_``, when given), else ``None``."""
        with self._lock:
            value = self._value(key, serializer)
        if value is _MISSING or (type_ is not None and not isinstance(value, type_)):
            return None
        return cast("T", value)

    def set(self, key: str, value: Any, *, serializer: StateSerializer[Any] | None = None) -> None:
        """Store ``value`` under ``key`` (replacing any previous value); with
        ``serializer``, :meth:`to_dict` writes it with that serializer."""
        if not isinstance(key, str):
            raise TypeError(f"state keys are str, not {type(key).__name__}")
        with self._lock:
            self._data[key] = value
            if serializer is None:
                self._serializers.pop(key, None)
            else:
                self._serializers[key] = serializer

    def setdefault(
        self,
        key: str,
        factory: Callable[[], T],
        *,
        serializer: StateSerializer[T] | None = None,
    ) -> T:
        """The value under ``key``, first storing ``factory()`` there if absent (atomic).
        ``serializer`` as for :meth:`set` (and :meth:`get`, for a value still encoded)."""
        with self._lock:
            value = self._value(key, serializer)
            if value is _MISSING:
                value = factory()
                self.set(key, value, serializer=serializer)
            return cast("T", value)

    def remove(self, key: str) -> bool:
        """Remove ``key``; return whether it was there."""
        with self._lock:
            self._serializers.pop(key, None)
            return self._data.pop(key, _MISSING) is not _MISSING

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return key in self._data

    def __len__(self) -> int:
        with self._lock:
            return len(self._data)

    def __iter__(self) -> Iterator[str]:
        with self._lock:
            return iter(list(self._data))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, StateBag):
            return NotImplemented
        return self.to_dict() == other.to_dict()

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        with self._lock:
            return f"StateBag(keys={sorted(self._data)!r})"

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of the bag (registered types tagged with ``$type``, values
        with their own serializer written by it)."""
        with self._lock:
            snapshot = dict(self._data)
            serializers = dict(self._serializers)
        result: dict[str, Any] = {}
        for key, value in snapshot.items():
            if not isinstance(key, str):
                raise TypeError(f"state dict keys must be str, not {key!r}")
            if isinstance(value, _Encoded):
                result[key] = {_TYPE_KEY: _SLOT_TYPE, "value": value.data}
            elif key in serializers:
                result[key] = {_TYPE_KEY: _SLOT_TYPE, "value": serializers[key].to_json(value)}
            else:
                result[key] = _to_json(value)
        if _TYPE_KEY in result:  # a state key that happens to be the marker
            return {_TYPE_KEY: "dict", "value": result}
        return result

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> StateBag:
        """Rebuild a bag from :meth:`to_dict` output."""
        return cls(_from_json(dict(data)))

    def copy(self) -> StateBag:
        """A deep copy (values are copied, not shared)."""
        with self._lock:
            duplicate = StateBag(copy.deepcopy(self._data))
            duplicate._serializers.update(self._serializers)
            return duplicate


class AgentSession:
    """One conversation: its id, the service's conversation id (if the service keeps the
    history) and its :class:`StateBag`.

    ``AgentSession()`` makes a new session with a fresh sortable id;
    ``AgentSession("chat-42")`` resumes the conversation stored under that id.
    """

    __slots__ = ("_local", "conversation_id", "session_id", "state")

    def __init__(
        self,
        session_id: str | None = None,
        *,
        conversation_id: str | None = None,
        state: StateBag | None = None,
    ) -> None:
        from .records import check_session_id

        self.session_id: str = new_id() if session_id is None else check_session_id(session_id)
        self.conversation_id: str | None = conversation_id
        self.state: StateBag = state if state is not None else StateBag()
        # What providers cache for this process only (HistoryProvider's decoded window):
        # never serialized, never copied; a deserialized session starts without it.
        self._local: dict[str, Any] = {}

    def get_service(self, service_type: type[T], key: str | None = None) -> T | None:
        """An object of ``service_type`` the session holds, or ``None``.

        Without ``key``: the session itself or its state bag, when of that type (subclasses
        add what they wrap, as MAF's ``AgentSession.GetService`` lets them). With ``key``:
        the value kept in the state bag under ``key`` (a provider's slot, by its state
        key), when it is a ``service_type``::

            session.get_service(StateBag) is session.state
            session.get_service(list, "chat_history.loaded_ids")   # a slot's value, or None

        :param service_type: the class wanted.
        :param key: a state key, to ask for a value the session keeps.
        :returns: the object, or ``None`` if the session holds none of that type.
        """
        if key is not None:
            return self.state.try_get(key, service_type)
        for candidate in (self, self.state):
            if isinstance(candidate, service_type):
                return candidate
        return None

    @property
    def is_service_managed(self) -> bool:
        """True once the model service keeps this conversation's history."""
        return self.conversation_id is not None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of the session."""
        return {
            "type": "session",
            "session_id": self.session_id,
            "conversation_id": self.conversation_id,
            "state": self.state.to_dict(),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> AgentSession:
        """Rebuild a session from :meth:`to_dict` output."""
        if data.get("type", "session") != "session":
            raise ValueError(f"not a serialized session: type {data.get('type')!r}")
        return cls(
            data["session_id"],
            conversation_id=data.get("conversation_id"),
            state=StateBag.from_dict(data.get("state") or {}),
        )

    def __repr__(self) -> str:
        return (
            f"AgentSession(session_id={self.session_id!r}, "
            f"conversation_id={self.conversation_id!r})"
        )


class ProviderSessionState(Generic[T]):
    """A provider's typed slot in a session's state bag.

    The provider holds one of these (not per-session data) and asks it for the session's
    value, which is created by ``initialize(session)`` the first time::

        counter = ProviderSessionState("my-provider", lambda session: {"turns": 0})
        state = counter.get_or_initialize(session)
        state["turns"] += 1
        counter.save(session, state)

    ``serializer`` gives the slot its own way to JSON and back (MAF's per-slot serializer
    options), so its value may be of a type nobody registered with
    :func:`register_state_type`; a session serialized and deserialized elsewhere decodes
    it on the slot's first read.
    """

    __slots__ = ("_initialize", "serializer", "state_key")

    def __init__(
        self,
        state_key: str,
        initialize: Callable[[AgentSession], T],
        *,
        serializer: StateSerializer[T] | None = None,
    ) -> None:
        self.state_key = state_key
        self._initialize = initialize
        self.serializer = serializer

    def get_or_initialize(self, session: AgentSession) -> T:
        """The session's value, created and stored on first use."""
        return session.state.setdefault(
            self.state_key, lambda: self._initialize(session), serializer=self.serializer
        )

    def save(self, session: AgentSession, value: T) -> None:
        """Store ``value`` as the session's value."""
        session.state.set(self.state_key, value, serializer=self.serializer)

    def clear(self, session: AgentSession) -> None:
        """Forget the session's value."""
        session.state.remove(self.state_key)
