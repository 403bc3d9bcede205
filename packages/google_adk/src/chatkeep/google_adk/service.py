"""``ChatkeepSessionService``: ADK's ``BaseSessionService`` on any chatkeep store."""

from __future__ import annotations

import copy
import logging
from typing import Any, TypeVar

from google.adk.events.event import Event
from google.adk.platform import time as platform_time
from google.adk.platform import uuid as platform_uuid
from google.adk.sessions import BaseSessionService, Session, State
from google.adk.sessions.base_session_service import GetSessionConfig, ListSessionsResponse
from pydantic_core import to_jsonable_python
from typing_extensions import override

from chatkeep.core import Store, adelete_session, delete_session, new_id
from chatkeep.core.adapters import adapter_store, async_session_lock, in_thread, native, settled
from chatkeep.core.views._program import Program, arun, run

from . import layout
from .ops import (
    Loaded,
    SessionView,
    StateCache,
    append_program,
    create_program,
    list_program,
    load_program,
    read_state,
)
from .records import Tail

__all__ = ["ChatkeepSessionService"]

logger = logging.getLogger(__name__)
T = TypeVar("T")

# The store hooks the programs call (SQLite and memory run them inline on the loop).
_READS = ("read",)
_WRITES = ("read", "append", "append_if")


def json_safe(state: dict[str, Any]) -> dict[str, Any]:
    """``state`` as JSON data, as ADK's database service stores state: rich values
    (datetimes, models) in their JSON form; what has none (a callable) as its ``repr``,
    with a warning, rather than failing the whole write."""
    try:
        safe: dict[str, Any] = to_jsonable_python(state)
    except Exception:
        logger.warning(
            "Some session state values are not JSON-serializable (e.g. callables); they "
            "are stored as their string representation.",
            exc_info=True,
        )
        safe = to_jsonable_python(state, serialize_unknown=True)
    return safe


def split_state(state: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    """A state (or state delta) split by scope, ``temp:`` keys dropped, made JSON-safe:
    ``{"app": ..., "user": ..., "session": ...}`` with the ``app:``/``user:`` prefixes
    taken off (ADK's own rule)."""
    scopes: dict[str, dict[str, Any]] = {"app": {}, "user": {}, "session": {}}
    for key, value in (state or {}).items():
        if key.startswith(State.APP_PREFIX):
            scopes["app"][key[len(State.APP_PREFIX) :]] = value
        elif key.startswith(State.USER_PREFIX):
            scopes["user"][key[len(State.USER_PREFIX) :]] = value
        elif not key.startswith(State.TEMP_PREFIX):
            scopes["session"][key] = value
    return json_safe(scopes) if any(scopes.values()) else scopes


def _merged(
    session_state: dict[str, Any], app_state: dict[str, Any], user_state: dict[str, Any]
) -> dict[str, Any]:
    """The state a session object shows: its own, then ``app:`` and ``user:`` keys."""
    merged = copy.deepcopy(session_state)
    for key, value in app_state.items():
        merged[State.APP_PREFIX + key] = value
    for key, value in user_state.items():
        merged[State.USER_PREFIX + key] = value
    return merged


def _session(
    *,
    app_name: str,
    user_id: str,
    id: str,
    state: dict[str, Any],
    events: list[Event],
    tail: Tail,
) -> Session:
    session = Session(
        app_name=app_name,
        user_id=user_id,
        id=id,
        state=state,
        events=events,
        last_update_time=tail.updated,
    )
    session._storage_update_marker = tail.marker()
    return session


def _normalized(session_id: str | None) -> str | None:
    """Session ids as ADK's in-memory and SQLite services take them: stripped."""
    return session_id.strip() if isinstance(session_id, str) else session_id


class ChatkeepSessionService(BaseSessionService):
    """An ADK session service keeping sessions, events and ``app:``/``user:`` state in any
    chatkeep store: a drop-in for ``InMemorySessionService``, ``SqliteSessionService`` and
    ``DatabaseSessionService``::

        from google.adk.runners import Runner
        from chatkeep.google_adk import ChatkeepSessionService

        service = ChatkeepSessionService(url="postgresql://localhost/app")
        runner = Runner(agent=agent, app_name="app", session_service=service)

    ``url``: a chatkeep store URL, opened here and closed by :meth:`close`. ``store``: an
    open :class:`~chatkeep.core.Store` to share (left open). Neither: ``$CHATKEEP_URL``,
    else the embedded SQLite file. Both, or a wrong type: ``InvalidOption``.

    Semantics are those of ADK's ``DatabaseSessionService`` (README: what is stored where,
    and the few places ADK's services disagree with each other).
    """

    def __init__(self, *, url: str | None = None, store: Store | None = None) -> None:
        self._store, self._owns_store = adapter_store(url, store, owner="ChatkeepSessionService")
        self._states = StateCache()

    @property
    def store(self) -> Store:
        """The chatkeep store the sessions are kept in."""
        return self._store

    # -- running the store work ------------------------------------------------------------

    @property
    def _conditional(self) -> bool:
        return self._store.supports("conditional")

    async def _run(self, program: Program[T], hooks: tuple[str, ...]) -> T:
        """Drive ``program``: awaited on this loop where the store allows it, else in a
        worker thread (or inline, for SQLite and memory)."""
        if native(self._store):
            return await arun(self._store, program)
        return await in_thread(self._store, hooks, run, self._store, program)

    async def _write(self, program: Program[T]) -> T:
        """:meth:`_run` for a program that writes: it runs to the end even if the caller
        is cancelled meanwhile, so what was stored is never a guess."""
        return await settled(self._run(program, _WRITES))

    # -- BaseSessionService ----------------------------------------------------------------

    @override
    async def create_session(
        self,
        *,
        app_name: str,
        user_id: str,
        state: dict[str, Any] | None = None,
        session_id: str | None = None,
    ) -> Session:
        session_id = _normalized(session_id) or platform_uuid.new_uuid()
        keys = layout.session_keys(app_name, user_id, session_id)
        created = platform_time.get_time()
        scopes = split_state(state)
        program = create_program(
            keys, (app_name, user_id, session_id), created, scopes, conditional=self._conditional
        )
        tail, app_state, user_state = await self._write(program)
        self._states.put(keys.session, tail.state_id, scopes["session"])
        merged = _merged(scopes["session"], app_state, user_state)
        return _session(
            app_name=app_name, user_id=user_id, id=session_id, state=merged, events=[], tail=tail
        )

    @override
    async def get_session(
        self,
        *,
        app_name: str,
        user_id: str,
        session_id: str,
        config: GetSessionConfig | None = None,
    ) -> Session | None:
        session_id = _normalized(session_id)  # type: ignore[assignment]
        keys = layout.session_keys(app_name, user_id, session_id)
        loaded = await self._load(keys, config)
        if loaded is None:
            return None
        events = [Event.model_validate(event) for event in loaded.events]
        merged = _merged(loaded.state, loaded.app_state, loaded.user_state)
        return _session(
            app_name=app_name,
            user_id=user_id,
            id=session_id,
            state=merged,
            events=events,
            tail=loaded.tail,
        )

    async def _load(
        self, keys: layout.SessionKeys, config: GetSessionConfig | None
    ) -> Loaded | None:
        """Every read of a session goes through here (one place for a cache to sit)."""
        recent = config.num_recent_events if config else None
        after = config.after_timestamp if config else None
        if not after:  # ADK's database service ignores 0 too
            after = None
        program = load_program(keys, recent, after, self._states)
        return await self._run(program, _READS)

    @override
    async def list_sessions(
        self, *, app_name: str, user_id: str | None = None
    ) -> ListSessionsResponse:
        if user_id is None:
            prefix = layout.app_prefix(app_name)
        else:
            prefix = layout.user_prefix(app_name, user_id)
        app_key = layout.app_prefix(app_name)
        found = []
        for key in await self._keys(prefix):
            ids = layout.parse(app_key, key)
            if ids is not None:
                found.append((key, *ids))
        program = list_program(
            layout.app_state_key(app_name),
            found,
            lambda user: layout.user_state_key(app_name, user),
            self._states,
        )
        app_state, listed = await self._run(program, _READS)
        sessions = [
            _session(
                app_name=app_name,
                user_id=item.user_id,
                id=item.session_id,
                state=_merged(item.state, app_state, item.user_state),
                events=[],
                tail=item.tail,
            )
            for item in listed
        ]
        sessions.sort(key=lambda s: (s.last_update_time, s.user_id, s.id))
        return ListSessionsResponse(sessions=sessions)

    async def _keys(self, prefix: str) -> list[str]:
        if native(self._store):
            return [key async for key in self._store.alist_sessions(prefix)]
        return await in_thread(
            self._store, ("list_sessions",), lambda: list(self._store.list_sessions(prefix))
        )

    @override
    async def delete_session(self, *, app_name: str, user_id: str, session_id: str) -> None:
        session_id = _normalized(session_id)  # type: ignore[assignment]
        key = layout.session_keys(app_name, user_id, session_id).session
        if native(self._store):
            await settled(adelete_session(self._store, key))
        else:
            await settled(in_thread(self._store, None, delete_session, self._store, key))

    @override
    async def get_user_state(self, *, app_name: str, user_id: str) -> dict[str, Any]:
        key = layout.user_state_key(app_name, user_id)
        return await self._run(read_state(key), _READS)

    @override
    async def append_event(self, session: Session, event: Event) -> Event:
        if event.partial:
            return event
        if session.events and session.events[-1].id == event.id and session.events[-1] == event:
            # The event this session object appended last, delivered again: stored once
            # (as ADK's in-memory service; ADK never re-delivers an event itself).
            return event
        # As ADK's services: temp: state reaches the session object (later agents of this
        # invocation read it), never storage.
        self._apply_temp_state(session, event)
        event = self._trim_temp_delta_state(event)
        scopes = split_state(event.actions.state_delta)
        keys = layout.session_keys(session.app_name, session.user_id, session.id)
        record_id = new_id()
        data = event.model_dump(mode="json", exclude_none=True)
        async with async_session_lock(self._store, keys.session):
            known = Tail.from_marker(session._storage_update_marker)
            view = SessionView(
                session.last_update_time, session.events[-1].id if session.events else None
            )
            program = append_program(
                keys,
                name=session.id,
                record_id=record_id,
                event=data,
                deltas=scopes,
                known=known,
                session=view,
                cache=self._states,
                conditional=self._conditional,
            )
            tail = await self._write(program)
            session.last_update_time = tail.updated
            session._storage_update_marker = tail.marker()
        return self._commit_event_to_session(session, event)

    # -- closing -----------------------------------------------------------------------------

    async def close(self) -> None:
        """Close the store if this service opened it (``url=``); a shared ``store=`` is
        left open. As ADK's ``DatabaseSessionService.close``."""
        if self._owns_store:
            await self._store.aclose()

    async def __aenter__(self) -> ChatkeepSessionService:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()
