"""The app over a real store (SQLite, Redis and PostgreSQL), through HTTP: every page, the
escaping of hostile content, the security headers, the token, and that nothing is ever
written."""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterator
from html.parser import HTMLParser
from urllib.parse import quote

import pytest
from starlette.testclient import TestClient

from chatkeep.core import Store, read_view
from chatkeep.core.views import read_log
from chatkeep.web import create_app
from chatkeep.web.conversation import PAGE_SIZE
from chatkeep.web.security import CSP

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def client(read_only_store: Store) -> Iterator[TestClient]:
    app = create_app(read_only_store, store_shown="redis://:secret@h/0 (from --url)")
    with TestClient(app, base_url="http://127.0.0.1:8700") as client:
        yield client


def page(client: TestClient, path: str) -> str:
    response = client.get(path)
    assert response.status_code == 200, response.text[:500]
    assert response.headers["content-security-policy"] == CSP
    assert response.headers["x-content-type-options"] == "nosniff"
    return response.text


def sid(session_id: str) -> str:
    return quote(session_id, safe="")


def test_sessions_page_newest_first_with_titles_and_counts(client: TestClient, corpus) -> None:
    text = page(client, "/")
    ids = [
        html.unescape(m)
        for m in re.findall(
            r'class="session-link" href="/session\?id=[^"]*"><code>([^<]*)</code>', text
        )
    ]
    # hostile was written last, then long, compacted, the fork, trip (undone: its last append
    # is the retract, before the fork's).
    assert ids[:4] == [corpus.hostile, corpus.long, corpus.compacted, corpus.fork]
    assert set(ids) == {corpus.trip, corpus.fork, corpus.compacted, corpus.long, corpus.hostile}
    assert "Plan a **trip** to Oslo" in text  # the title, escaped, not rendered
    assert f">{corpus.long_messages}<" in text
    assert "secret" not in text


def test_sessions_page_keyset_paging(client: TestClient, corpus, monkeypatch) -> None:
    from chatkeep.web import app as app_module

    monkeypatch.setattr(app_module, "SESSIONS_PER_PAGE", 2)
    seen: list[str] = []
    path = "/"
    for _ in range(5):
        text = page(client, path)
        seen += [html.unescape(m) for m in re.findall(r"<code>([^<]*)</code></a></td>", text)]
        older = re.search(r'rel="next" href="([^"]*)"', text)
        if older is None:
            break
        path = html.unescape(older.group(1))
    assert len(seen) == 5 and len(set(seen)) == 5


def test_conversation_shows_tool_calls_reasoning_media_and_markers(
    client: TestClient, corpus
) -> None:
    text = page(client, f"/session?id={corpus.trip}")
    assert '<details class="tool call">' in text and "weather" in text
    assert "&#34;city&#34;: &#34;Oslo&#34;" in text or '"city": "Oslo"' in html.unescape(text)
    assert '<details class="reasoning">' in text
    assert "<strong>trip</strong>" in text  # markdown rendered
    assert 'rel="noopener noreferrer nofollow"' in text
    assert '<img src="/media?' in text  # the PNG inline
    assert text.count("<img ") == 1  # the SVG is a download, not an image
    assert "status-undone" in text and "Actually, Bergen?" in text
    assert "kind-undo" in text and "Forked here" in text and "trip-fork" in text
    assert "secret" not in text


def test_fork_links_both_ways_and_the_forks_page(client: TestClient, corpus) -> None:
    text = page(client, f"/session?id={corpus.fork}")
    assert "<h1>Plan a **trip** to Oslo</h1>" in text  # the conversation's title, from its root
    link = re.search(r'class="fork-parent" href="([^"]*)"', text)
    assert link is not None
    parent = page(client, html.unescape(link.group(1)).split("#")[0])
    assert (
        "Plan a <strong>trip</strong> to Oslo" in parent
        and 'class="record message status-view target"' in parent
    )
    forks = page(client, f"/forks?id={corpus.trip}")
    assert "trip-fork" in forks


def test_checkpoint_and_compacted_messages(
    client: TestClient, corpus, read_only_store: Store
) -> None:
    text = page(client, f"/session?id={corpus.compacted}")
    assert "Compaction checkpoint" in text and "Summary of 3 turns" in text
    (checkpoint,) = [e for e in read_log(read_only_store, corpus.compacted) if e.is_control]
    assert checkpoint.control is not None
    # 8 messages before the checkpoint, its last `keep` still in the view
    assert text.count("record message status-compacted") == 8 - checkpoint.control["keep"]
    assert "after the checkpoint" in text


def test_long_session_paged_from_the_end(client: TestClient, corpus) -> None:
    text = page(client, f"/session?id={corpus.long}")
    last = corpus.long_messages - 1
    assert f">long message {last}</p>" in text and ">long message 0</p>" not in text
    assert text.count('class="record message') == PAGE_SIZE
    older = re.search(r'rel="prev" href="([^"]*)"', text)
    assert older is not None
    second = page(client, html.unescape(older.group(1)))
    assert f">long message {last - PAGE_SIZE}</p>" in second
    assert f">long message {last}</p>" not in second


def test_download_is_the_export_format(client: TestClient, corpus) -> None:
    response = client.get(f"/session.jsonl?id={corpus.trip}")
    assert response.status_code == 200
    assert response.headers["content-disposition"].startswith("attachment")
    lines = [json.loads(line) for line in response.text.splitlines()]
    assert lines[0]["chatkeep"]
    assert {line["session"] for line in lines if "session" in line} == {corpus.trip}


class _Elements(HTMLParser):
    """Every element of a page with its attributes, as a browser's parser sees them."""

    def __init__(self) -> None:
        super().__init__()
        self.elements: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.elements.append((tag, dict(attrs)))


def elements(text: str) -> list[tuple[str, dict[str, str | None]]]:
    parser = _Elements()
    parser.feed(text)
    return parser.elements


def test_hostile_content_is_escaped_everywhere(client: TestClient, corpus) -> None:
    for path in ("/", f"/session?id={sid(corpus.hostile)}", f"/forks?id={sid(corpus.hostile)}"):
        text = page(client, path)
        found = elements(text)
        scripts = [attrs.get("src") for tag, attrs in found if tag == "script"]
        assert scripts == ["/static/app.js"]
        for tag, attrs in found:
            assert tag not in ("iframe", "svg", "object", "embed", "base", "form") or (
                tag == "form" and attrs.get("action") in ("/", "/session", "/search")
            )
            assert not [name for name in attrs if name.startswith("on")], (tag, attrs)
            for name in ("href", "src", "action"):
                value = (attrs.get(name) or "").strip().lower()
                assert not value.startswith(("javascript:", "data:", "vbscript:")), (tag, attrs)
        # the page is intact: its last element is the footer's paragraph
        assert found[-1][0] == "p" and text.rstrip().endswith("</html>")
    text = page(client, f"/session?id={sid(corpus.hostile)}")
    assert "&lt;script&gt;alert(" in text


def test_media_inline_only_for_safe_types(client: TestClient, corpus) -> None:
    text = page(client, f"/session?id={corpus.trip}")
    hrefs = [html.unescape(h) for h in re.findall(r'href="(/media\?[^"]*)"', text)]
    png, svg = hrefs[0], hrefs[-1]
    image = client.get(png)
    assert image.headers["content-type"] == "image/png" and image.content.startswith(b"\x89PNG")
    download = client.get(svg)
    assert download.headers["content-type"] == "application/octet-stream"
    assert download.headers["content-disposition"].startswith("attachment")
    assert "sandbox" in download.headers["content-security-policy"]


def test_nothing_but_get(client: TestClient, corpus, read_only_store: Store) -> None:
    before = {s: read_only_store.read(s) for s in (corpus.trip, corpus.long)}
    for method in ("POST", "PUT", "DELETE", "PATCH"):
        response = client.request(method, f"/session?id={corpus.trip}")
        assert response.status_code == 405
    for path in ("/", f"/session?id={corpus.trip}", f"/session.jsonl?id={corpus.trip}"):
        page_or_file = client.get(path)
        assert page_or_file.status_code == 200
    assert {s: read_only_store.read(s) for s in before} == before
    assert len(read_view(read_only_store, corpus.trip)) == 4


def test_bad_input_is_one_line_errors(client: TestClient, corpus) -> None:
    assert client.get("/session").status_code == 400
    assert client.get("/session?id=nope").status_code == 404
    assert client.get(f"/session?id={corpus.trip}&before=x").status_code == 400
    assert client.get("/?before=garbage").status_code == 400
    assert client.get("/session?id=a%00b").status_code == 400
    assert client.get(f"/media?id={corpus.trip}&p=0&c=9").status_code == 404


def test_dns_rebinding_host_refused(read_only_store: Store) -> None:
    app = create_app(read_only_store, hosts=("127.0.0.1", "localhost"))
    with TestClient(app, base_url="http://evil.example:8700") as client:
        assert client.get("/").status_code == 421
    with TestClient(app, base_url="http://localhost:8700") as client:
        assert client.get("/").status_code == 200


def test_token_checked_on_every_request(read_only_store: Store) -> None:
    token = "t" * 24
    app = create_app(read_only_store, token=token)
    with TestClient(app, base_url="http://10.0.0.5:8700") as client:
        assert client.get("/").status_code == 401
        assert client.get("/static/app.css").status_code == 401
        assert client.get("/?token=wrong-token-wrong-token").status_code == 401
        assert client.get("/", headers={"authorization": f"Bearer {token}"}).status_code == 200
        first = client.get(f"/?token={token}&prefix=t", follow_redirects=False)
        assert first.status_code == 303 and first.headers["location"] == "/?prefix=t"
        assert token not in first.headers["location"]
        assert client.get("/").status_code == 200  # the cookie now


def test_keyset_pages_without_a_recent_index(monkeypatch: pytest.MonkeyPatch) -> None:
    """A store without ``recent`` (memory, its index hidden) pages by the same cursor,
    from every session's last record; sessions without a stored time come last and page."""
    import asyncio
    import uuid
    from concurrent.futures import ThreadPoolExecutor

    from chatkeep.core import Message, TextContent, encode_records, open_store
    from chatkeep.core.metadata import utc_stamp
    from chatkeep.web.listing import format_cursor, parse_cursor, sessions_page

    store = open_store(f"memory://web-{uuid.uuid4().hex}")
    supports = Store.supports
    monkeypatch.setattr(
        Store, "supports", lambda self, name: name != "recent" and supports(self, name)
    )
    for n in range(7):
        stamp = utc_stamp() if n < 5 else None  # two written without a time
        message = Message("user", [TextContent(f"hi {n}")], message_id=f"m{n}")
        store.append(f"s{n}", encode_records([message], stored_at=stamp))
    seen: list[str] = []
    cursor = None
    for _ in range(10):
        # in a thread of its own: the browser tests' Playwright keeps a loop in this one
        with ThreadPoolExecutor(1) as pool:
            page = pool.submit(asyncio.run, sessions_page(store, before=cursor, limit=3)).result()
        assert not page.indexed
        seen += [row.info.id for row in page.sessions]
        if page.next_cursor is None:
            break
        cursor = parse_cursor(format_cursor(page.next_cursor))
    assert sorted(seen) == [f"s{n}" for n in range(7)] and len(seen) == 7
    assert set(seen[-2:]) == {"s5", "s6"}  # no time: last
    with pytest.raises(ValueError):
        parse_cursor("nan~s1")
    with pytest.raises(ValueError):
        parse_cursor("no-tilde")


def test_undo_and_checkpoint_state_carries_across_pages(
    client: TestClient, corpus, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With pages of one record, each status still comes out as on one page: the walk's
    state travels in the link to the older page."""
    from chatkeep.web import app as app_module

    def statuses(session_id: str, size: int) -> list[str]:
        monkeypatch.setattr(app_module, "PAGE_SIZE", size)
        found: list[str] = []
        path = f"/session?id={session_id}"
        for _ in range(40):
            text = page(client, path)
            pattern = r'<li class="record [a-z]+(?: kind-[a-z]+)? (status-[a-z]+)'
            found = re.findall(pattern, text) + found
            older = re.search(r'rel="prev" href="([^"]*)"', text)
            if older is None:
                return found
            path = html.unescape(older.group(1))
        raise AssertionError("too many pages")

    for session_id in (corpus.trip, corpus.compacted):
        whole = statuses(session_id, 100)
        assert "status-undone" in whole or "status-compacted" in whole
        assert statuses(session_id, 1) == whole


def test_a_session_appended_to_since_shows_the_new_records(client: TestClient, corpus) -> None:
    """The app remembers a session's length between pages; an append since is seen."""
    from chatkeep.core import Message, TextContent, encode_records, open_store

    assert "And Stockholm?" in page(client, f"/session?id={corpus.fork}")
    assert "And Stockholm?" in page(client, f"/session?id={corpus.fork}")  # remembered
    writer = open_store(corpus.url)
    try:
        message = Message("user", [TextContent("And Tallinn?")], message_id="later-1")
        writer.append(corpus.fork, encode_records([message]))
    finally:
        writer.close()
    assert "And Tallinn?" in page(client, f"/session?id={corpus.fork}")


def test_message_permalink_finds_it_in_the_fork_ancestor(client: TestClient, corpus) -> None:
    """``/message?id=FORK&m=ID`` of a message of the fork's prefix goes to the parent's
    page that shows it."""
    response = client.get(
        f"/message?id={corpus.fork}&m={corpus.fork_point}", follow_redirects=False
    )
    assert response.status_code == 303
    location = response.headers["location"]
    assert location.startswith("/session?id=trip&at=3") and location.endswith("#p-3")
    assert 'id="p-3"' in page(client, location.split("#")[0])
    assert client.get(f"/message?id={corpus.fork}&m=nope").status_code == 404
    assert client.get(f"/message?id={corpus.fork}").status_code == 400


def test_a_damaged_session_is_marked_not_fatal() -> None:
    """A record that is not a chatkeep record: the sessions page marks the session damaged
    and the conversation page shows the record as damaged, the others as they are."""
    import uuid

    from chatkeep.core import Message, Record, TextContent, encode_records, open_store

    store = open_store(f"memory://web-{uuid.uuid4().hex}")
    good = encode_records([Message("user", [TextContent("still readable")], message_id="m1")])
    store.append("bad", [*good, Record("r2", b"\xff not json")])
    with TestClient(create_app(store), base_url="http://127.0.0.1:8700") as client:
        listing = page(client, "/")
        assert 'class="damage"' in listing and "bad" in listing
        text = page(client, "/session?id=bad")
        assert "Damaged record" in text and "still readable" in text


def test_a_store_that_cannot_list_offers_to_open_by_id(monkeypatch: pytest.MonkeyPatch) -> None:
    import uuid

    from chatkeep.core import CapabilityMissing, Message, TextContent, encode_records, open_store
    from chatkeep.web import listing

    store = open_store(f"memory://web-{uuid.uuid4().hex}")
    store.append("s1", encode_records([Message("user", [TextContent("hi")], message_id="m1")]))

    def cannot_list(store: Store, prefix: str | None = None) -> None:
        raise CapabilityMissing(store.name, "list_sessions")

    supports = Store.supports
    monkeypatch.setattr(
        Store, "supports", lambda self, name: name != "recent" and supports(self, name)
    )
    monkeypatch.setattr(listing, "alist_conversations", cannot_list)
    with TestClient(create_app(store), base_url="http://127.0.0.1:8700") as client:
        text = page(client, "/")
        assert "cannot list its sessions" in text and 'action="/session"' in text
        assert "hi" in page(client, "/session?id=s1")
