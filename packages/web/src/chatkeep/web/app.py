"""The web app: routes over an open store, server-rendered with Jinja2.

::

    from chatkeep.core import open_store
    from chatkeep.web import create_app

    app = create_app(open_store("sqlite:///chats.db?mode=ro"))   # any ASGI server runs it

Routes (all ``GET``): ``/`` the sessions, newest first (``?before=`` the keyset cursor,
``?prefix=``); ``/session?id=ID`` a conversation, paged from its end (``&before=POSITION``);
``/message?id=ID&m=MESSAGE_ID`` a message's permalink (a redirect to the page
showing it, in the session or the fork ancestor holding it); ``/session.jsonl?id=ID`` its
download in the export format; ``/media?id=ID&p=POSITION&c=N``
one data content; ``/forks?id=ID`` the sessions forked from it; ``/static/...`` the page's
CSS and script. Session ids travel in the query string, percent-encoded, whatever they hold.
"""

from __future__ import annotations

import io
from collections import OrderedDict
from datetime import datetime, timezone
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from chatkeep.core import (
    CapabilityMissing,
    DataContent,
    FunctionCallContent,
    FunctionResultContent,
    InvalidSessionId,
    Message,
    ReasoningContent,
    SessionNotFound,
    Store,
    TextContent,
    UnknownContent,
    UriContent,
    message_from_dict,
)
from chatkeep.core.transfer import export_jsonl
from chatkeep.core.urls import redact_text
from chatkeep.core.views import alist_forks, decode_log
from chatkeep.core.views._program import arun
from chatkeep.core.views._walk import find_record

from .conversation import KINDS_SHOWN, PAGE_SIZE, Known, WalkState, log_page, page_of
from .listing import format_cursor, parse_cursor, sessions_page
from .render import INLINE_MEDIA, markdown, pretty_json, safe_link
from .security import Guard

__all__ = ["create_app"]

_HERE = Path(__file__).parent
#: Sessions per page of the sessions list.
SESSIONS_PER_PAGE = 50
#: How many sessions' :class:`~chatkeep.web.conversation.Known` the app keeps.
KNOWN_SESSIONS = 1024


def _url(path: str, **params: Any) -> str:
    """``path`` with ``params`` percent-encoded (``None`` values left out)."""
    shown = {key: value for key, value in params.items() if value is not None}
    return f"{path}?{urlencode(shown)}" if shown else path


def _when(moment: datetime | None) -> str:
    if moment is None:
        return "-"
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _iso(moment: datetime | None) -> str:
    return "" if moment is None else moment.astimezone(timezone.utc).isoformat()


def _content_kind(content: object) -> str:
    for kind, cls in (
        ("text", TextContent),
        ("call", FunctionCallContent),
        ("result", FunctionResultContent),
        ("data", DataContent),
        ("uri", UriContent),
        ("reasoning", ReasoningContent),
        ("unknown", UnknownContent),
    ):
        if isinstance(content, cls):
            return kind
    return "unknown"


def _decode(item: object) -> Message | None:
    """A message held inside a control record (a checkpoint's, an edit's), or ``None``."""
    if not isinstance(item, dict):
        return None
    try:
        return message_from_dict(item)
    except (TypeError, ValueError, KeyError):
        return None


def _environment() -> Environment:
    env = Environment(
        loader=FileSystemLoader(_HERE / "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.globals.update(
        url=_url,
        when=_when,
        iso=_iso,
        content_kind=_content_kind,
        markdown=markdown,
        pretty_json=pretty_json,
        safe_link=safe_link,
        inline_media=INLINE_MEDIA,
        kinds_shown=KINDS_SHOWN,
        decode=_decode,
        redact=redact_text,
    )
    return env


class _Pages:
    """The route handlers, over one store."""

    def __init__(self, store: Store, store_shown: str) -> None:
        self.store = store
        self.store_shown = store_shown
        self.env = _environment()
        # What the last page of each recently shown session found (see Known), at most
        # KNOWN_SESSIONS of them, the least recently shown dropped first.
        self.known: OrderedDict[str, Known] = OrderedDict()

    def _html(self, template: str, status: int = 200, **context: Any) -> HTMLResponse:
        body = self.env.get_template(template).render(store=self.store_shown, **context)
        return HTMLResponse(body, status_code=status)

    def _error(self, status: int, text: str) -> HTMLResponse:
        return self._html("error.html", status, title=f"{status}", message=redact_text(text))

    def _session_id(self, request: Request) -> str:
        session_id = request.query_params.get("id")
        if not session_id:
            raise HTTPException(400, "which session? (?id=SESSION_ID)")
        return session_id

    def _int(self, request: Request, name: str, minimum: int = 0) -> int | None:
        value = request.query_params.get(name)
        if value is None or value == "":
            return None
        try:
            number = int(value)
        except ValueError:
            raise HTTPException(400, f"{name} must be a whole number") from None
        if number < minimum:
            raise HTTPException(400, f"{name} must be at least {minimum}")
        return number

    async def sessions(self, request: Request) -> Response:
        prefix = request.query_params.get("prefix") or None
        try:
            before = parse_cursor(request.query_params.get("before"))
        except ValueError as error:
            return self._error(400, f"bad cursor: {error}")
        try:
            page = await sessions_page(
                self.store, prefix=prefix, before=before, limit=SESSIONS_PER_PAGE
            )
        except CapabilityMissing:
            page = None  # a store that cannot list: the page offers to open one by id
        older = None
        if page is not None and page.next_cursor is not None:
            older = _url("/", prefix=prefix, before=format_cursor(page.next_cursor))
        return self._html(
            "sessions.html", page=page, prefix=prefix or "", older=older, first=before is None
        )

    async def conversation(self, request: Request) -> Response:
        session_id = self._session_id(request)
        before = self._int(request, "before")
        at = self._int(request, "at")
        if at is not None and before is None:
            before = page_of(at)
        state = WalkState(
            request.query_params.get("undo") or None,
            self._int(request, "kept"),
            request.query_params.get("covers") or None,
            self._int(request, "ckeep") or 0,
        )
        try:
            page = await log_page(
                self.store,
                session_id,
                before=before,
                state=state,
                size=PAGE_SIZE,
                known=self.known.get(session_id),
            )
        except InvalidSessionId as error:
            return self._error(400, str(error))
        if page.length == 0:
            self.known.pop(session_id, None)
            return self._error(404, "no such session")
        if page.known is not None:
            self.known[session_id] = page.known
            self.known.move_to_end(session_id)
            while len(self.known) > KNOWN_SESSIONS:
                self.known.popitem(last=False)
        older = None
        if page.start > 0:
            older = _url(
                "/session",
                id=session_id,
                before=page.start,
                undo=page.older.undo_target,
                kept=page.older.kept,
                covers=page.older.covers,
                ckeep=page.older.covers_keep if page.older.covers else None,
            )
        newer = None
        if page.stop < page.length:
            newer = _url("/session", id=session_id, before=min(page.stop + PAGE_SIZE, page.length))
        return self._html(
            "conversation.html",
            session_id=session_id,
            info=page.header,
            page=page,
            older=older,
            newer=newer,
            at=at,
        )

    async def message(self, request: Request) -> Response:
        """A message's permalink by id: redirects to the page of the log (the session's
        own, or the fork ancestor's that holds it) showing it, focused."""
        session_id = self._session_id(request)
        message_id = request.query_params.get("m")
        if not message_id:
            raise HTTPException(400, "which message? (&m=MESSAGE_ID)")
        try:
            found = await arun(self.store, find_record(session_id, message_id))
        except InvalidSessionId as error:
            return self._error(400, str(error))
        if found is None:
            return self._error(404, "no such message in this session")
        holder, position = found
        target = _url("/session", id=holder, at=position) + f"#p-{position}"
        return RedirectResponse(target, status_code=303)

    async def forks(self, request: Request) -> Response:
        session_id = self._session_id(request)
        try:
            forks = await alist_forks(self.store, session_id)
        except InvalidSessionId as error:
            return self._error(400, str(error))
        return self._html("forks.html", session_id=session_id, forks=sorted(forks))

    async def download(self, request: Request) -> Response:
        session_id = self._session_id(request)

        def export() -> str:
            out = io.StringIO()
            export_jsonl(self.store, out, sessions=[session_id])
            return out.getvalue()

        try:
            body = await run_in_threadpool(export)
        except SessionNotFound:
            return self._error(404, "no such session")
        except InvalidSessionId as error:
            return self._error(400, str(error))
        return Response(
            body,
            media_type="application/x-ndjson",
            headers={"content-disposition": 'attachment; filename="session.jsonl"'},
        )

    async def media(self, request: Request) -> Response:
        session_id = self._session_id(request)
        position = self._int(request, "p")
        index = self._int(request, "c")
        if position is None or index is None:
            raise HTTPException(400, "media needs p (a position) and c (a content index)")
        try:
            records = await self.store.aread(session_id, position, position + 1)
        except InvalidSessionId as error:
            return self._error(400, str(error))
        entries = decode_log(records, position)
        message: Message | None = entries[0].message if entries else None
        if message is None or index >= len(message.contents):
            return self._error(404, "no such content")
        content = message.contents[index]
        if not isinstance(content, DataContent):
            return self._error(404, "no data there")
        media_type = content.media_type.lower().split(";", 1)[0].strip()
        inline = media_type in INLINE_MEDIA
        headers = {"content-security-policy": "sandbox; default-src 'none'"}
        if not inline:
            headers["content-disposition"] = 'attachment; filename="content.bin"'
        return Response(
            content.data,
            media_type=media_type if inline else "application/octet-stream",
            headers=headers,
        )

    async def http_error(self, request: Request, error: Exception) -> Response:
        assert isinstance(error, HTTPException)
        return self._error(error.status_code, error.detail)


def create_app(store: Store, *, store_shown: str = "", token: str | None = None,
               hosts: tuple[str, ...] = ()) -> Any:  # fmt: skip
    """The ASGI app over an open ``store`` (the caller opens it read-only and closes it).

    ``store_shown`` is what the page says the store is (already without credentials);
    ``token``: every request must carry it (see :mod:`chatkeep.web.security`); ``hosts``:
    the ``Host`` names it answers to (empty: any)."""
    pages = _Pages(store, redact_text(store_shown))
    app = Starlette(
        routes=[
            Route("/", pages.sessions),
            Route("/session", pages.conversation),
            Route("/session.jsonl", pages.download),
            Route("/media", pages.media),
            Route("/forks", pages.forks),
            Route("/message", pages.message),
            Route("/favicon.ico", lambda _request: Response(status_code=204)),
            Mount("/static", StaticFiles(directory=_HERE / "static"), name="static"),
        ],
        exception_handlers={HTTPException: pages.http_error},
    )
    return Guard(app, token=token, hosts=hosts)
