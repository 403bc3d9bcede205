"""The page in a real browser: Playwright driving the distribution's Chromium
(``/usr/bin/chromium``, installed by ``.ci/run``; never a downloaded build), against
``chatkeep serve``'s app on a real uvicorn server, over SQLite and Redis.

One browser for the whole run; one server and one corpus per backend. Every page load
listens for dialogs, page errors and console errors: a hostile message that ran script
(an ``alert``) or broke the page would show there. A screenshot of each page goes to
``$CHATKEEP_WEB_ARTIFACTS`` (default ``.cache/web-artifacts`` at the repository root).

Outside CI a missing Chromium or Playwright skips with the reason; under ``CI=true`` it fails.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from chatkeep.cli.stores import StoreChoice, open_store_for
from chatkeep.web import create_app
from chatkeep.web.conversation import PAGE_SIZE

pytestmark = pytest.mark.timeout(180)

CHROMIUM = os.environ.get("CHATKEEP_CHROMIUM", "/usr/bin/chromium")
ROOT = Path(__file__).resolve().parents[3]
ARTIFACTS = Path(os.environ.get("CHATKEEP_WEB_ARTIFACTS", ROOT / ".cache" / "web-artifacts"))


def _unavailable(reason: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason} (CI=true: the browser tests must run)")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    """One headless Chromium for the run."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("Playwright for Python is not installed")
    if not Path(CHROMIUM).exists() and shutil.which(CHROMIUM) is None:
        _unavailable(f"no Chromium at {CHROMIUM} (apt-get install -y chromium)")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield browser
        browser.close()


class Server:
    """The app on uvicorn in a thread, on a socket bound before the thread starts (so the
    first request waits in the socket's backlog, never for a sleep)."""

    def __init__(self, url: str) -> None:
        import uvicorn

        self.store = open_store_for(StoreChoice(url, "--url"), read_only=True)
        app = create_app(self.store, store_shown=url, hosts=("127.0.0.1", "localhost"))
        self.socket = socket.socket()
        self.socket.bind(("127.0.0.1", 0))
        self.socket.listen(128)
        self.base = f"http://127.0.0.1:{self.socket.getsockname()[1]}"
        config = uvicorn.Config(app, log_level="warning", access_log=False)
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self.socket]}, daemon=True
        )
        self.thread.start()

    def close(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)
        self.socket.close()
        self.store.close()


@pytest.fixture(scope="module", params=["sqlite", "redis"])
def site(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Server, Any]]:
    from chatkeep.testing.servers import fresh_store_url

    write_corpus = request.getfixturevalue("corpus_writer")
    url = fresh_store_url(request.param, request, tmp_path_factory.mktemp("web"))
    corpus = write_corpus(url, long_messages=10_000)
    server = Server(url)
    yield server, corpus
    server.close()


class Watched:
    """A page whose dialogs, page errors and console errors are collected."""

    def __init__(self, page: Any) -> None:
        self.page = page
        self.dialogs: list[str] = []
        self.errors: list[str] = []

        def on_dialog(dialog: Any) -> None:
            self.dialogs.append(f"{dialog.type}: {dialog.message}")
            dialog.dismiss()

        page.on("dialog", on_dialog)
        page.on("pageerror", lambda error: self.errors.append(str(error)))
        page.on(
            "console",
            lambda message: self.errors.append(message.text) if message.type == "error" else None,
        )

    def silent(self) -> None:
        assert self.dialogs == [] and self.errors == [], (self.dialogs, self.errors)


@pytest.fixture
def watched(browser: Any, site: tuple[Server, Any]) -> Iterator[Watched]:
    context = browser.new_context(accept_downloads=True, viewport={"width": 1100, "height": 900})
    page = context.new_page()
    page.set_default_timeout(15_000)
    watcher = Watched(page)
    yield watcher
    context.close()


def shoot(page: Any, name: str, backend_url: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    backend = backend_url.split(":", 1)[0]
    page.screenshot(path=str(ARTIFACTS / f"{backend}-{name}.png"), full_page=False)


def test_list_open_expand_and_fork_both_ways(watched: Watched, site) -> None:
    server, corpus = site
    page = watched.page
    page.goto(server.base + "/")
    rows = page.locator("tr.session a.session-link")
    assert rows.count() == 5
    assert rows.first.inner_text() == corpus.hostile  # the newest, shown as text
    shoot(page, "sessions", corpus.url)
    page.get_by_role("link", name=corpus.trip, exact=True).click()
    page.wait_for_url(re.compile(r"/session\?id=trip$"))
    call = page.locator("details.tool.call").first
    assert not call.evaluate("d => d.open")
    call.locator("summary").click()
    assert call.evaluate("d => d.open")
    assert '"city": "Oslo"' in call.locator("pre").inner_text()
    assert page.locator("img").first.evaluate("i => i.naturalWidth") == 1  # the PNG loaded
    # undone turn hidden, then shown by its toggle
    undone = page.locator("li.status-undone").first
    assert not undone.is_visible()
    page.get_by_label("Undone turns").check()
    assert undone.is_visible()
    page.get_by_label("Undone turns").uncheck()
    shoot(page, "conversation", corpus.url)
    # to the fork and back to its parent, at the fork point
    page.locator("a.fork-child").click()
    page.wait_for_url(re.compile(r"id=trip-fork"))
    assert "And Stockholm?" in page.locator("main").inner_text()
    page.locator("a.fork-parent").click()
    page.wait_for_url(re.compile(r"id=trip&at="))
    target = page.locator("li.message.target")
    assert target.count() == 1 and target.evaluate("el => el === document.activeElement")
    watched.silent()


def test_long_session_pages_from_the_end(watched: Watched, site) -> None:
    server, corpus = site
    page = watched.page
    page.goto(server.base + f"/session?id={corpus.long}")
    last = corpus.long_messages - 1
    messages = page.locator("li.message")
    assert messages.count() == PAGE_SIZE
    assert messages.last.inner_text().strip().endswith(f"long message {last}")
    page.get_by_role("link", name="Earlier records").click()
    newest = page.locator("li.message").last.inner_text().strip()
    assert newest.endswith(f"long message {last - PAGE_SIZE}")
    shoot(page, "long-earlier", corpus.url)
    page.goto(server.base + f"/forks?id={corpus.trip}")
    assert page.locator("ul.forks a").all_inner_texts() == [corpus.fork]
    shoot(page, "forks", corpus.url)
    page.goto(server.base + f"/session?id={corpus.compacted}")
    page.get_by_text("Compaction checkpoint").click()
    assert page.get_by_text("Summary of 3 turns").is_visible()
    shoot(page, "checkpoint", corpus.url)
    watched.silent()


def test_download_is_json_lines(watched: Watched, site, tmp_path: Path) -> None:
    server, corpus = site
    page = watched.page
    page.goto(server.base + f"/session?id={corpus.trip}")
    with page.expect_download() as download_info:
        page.get_by_role("link", name="Download JSON Lines").click()
    saved = tmp_path / "trip.jsonl"
    download_info.value.save_as(saved)
    lines = saved.read_text().splitlines()
    assert lines[0].startswith('{"chatkeep"') and any('"session":"trip"' in x for x in lines)
    watched.silent()


def test_hostile_corpus_runs_nothing_and_the_page_stays_intact(watched: Watched, site) -> None:
    server, corpus = site
    page = watched.page
    page.goto(server.base + "/")
    page.goto(server.base + "/session?" + _query(corpus.hostile))
    for box in ("Undone turns", "Checkpoints, edits and forks", "Compacted messages"):
        page.get_by_label(box).check()
    page.get_by_role("button", name="Expand all tool calls").click()
    page.locator("details").evaluate_all("ds => ds.forEach(d => d.open = true)")
    text = page.locator("main").inner_text()
    assert "<script>alert('script')</script>" in text  # shown as text
    assert "</article></li></ol></main>" in text
    assert page.locator("footer.bottom").count() == 1  # the page's own end is still there
    assert page.locator("main script, main iframe, main svg, main object").count() == 0
    assert page.locator("main img").count() == 0  # the SVG is a download, not an image
    # a click on every link of the content does not run script either
    for link in page.locator("main .text a").all():
        assert link.get_attribute("href", timeout=1000).startswith(("http://", "https://"))
    assert page.evaluate("document.title").endswith("· chatkeep")
    shoot(page, "hostile", corpus.url)
    watched.silent()


def _query(session_id: str) -> str:
    from urllib.parse import urlencode

    return urlencode({"id": session_id})


def test_keyboard_and_accessibility(watched: Watched, site) -> None:
    server, corpus = site
    page = watched.page
    page.goto(server.base + f"/session?id={corpus.trip}")
    # landmarks
    for role in ("banner", "main", "contentinfo", "navigation"):
        assert page.get_by_role(role).count() >= 1, role
    # every form control has a label
    unlabelled = page.evaluate(
        """() => Array.from(document.querySelectorAll('input, select, textarea'))
             .filter(el => !(el.labels && el.labels.length) && !el.getAttribute('aria-label'))
             .map(el => el.id || el.name)"""
    )
    assert unlabelled == []
    # the skip link is the first tab stop and moves focus to main
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.textContent") == "Skip to content"
    page.keyboard.press("Enter")
    assert page.evaluate("document.activeElement.id") == "main"
    # j / k move between messages
    page.keyboard.press("j")
    first = page.evaluate("document.activeElement.id")
    page.keyboard.press("j")
    second = page.evaluate("document.activeElement.id")
    page.keyboard.press("k")
    assert first.startswith("p-") and second != first
    assert page.evaluate("document.activeElement.id") == first
    # a tool call opens from the keyboard
    page.locator("details.tool.call summary").first.focus()
    page.keyboard.press("Enter")
    assert page.locator("details.tool.call").first.evaluate("d => d.open")
    # contrast of the default theme: every text element at least 4.5:1 against its background
    worst = page.evaluate(CONTRAST)
    assert worst["ratio"] >= 4.5, worst
    page.goto(server.base + "/")
    assert page.evaluate(CONTRAST)["ratio"] >= 4.5
    watched.silent()


# The lowest WCAG contrast ratio between a visible text element's colour and the first
# opaque background behind it (alpha ignored: the theme uses opaque colours only).
CONTRAST = """() => {
  const parse = c => (c.match(/[\\d.]+/g) || []).map(Number);
  const lum = ([r, g, b]) => {
    const f = v => {
      v /= 255;
      return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4);
    };
    return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b);
  };
  const background = el => {
    for (let node = el; node; node = node.parentElement) {
      const c = parse(getComputedStyle(node).backgroundColor);
      if (c.length === 3 || (c.length === 4 && c[3] > 0)) return c.slice(0, 3);
    }
    return [255, 255, 255];
  };
  let worst = {ratio: 21, text: ''};
  for (const el of document.querySelectorAll('body *')) {
    if (!el.offsetParent && el.tagName !== 'BODY') continue;
    const own = Array.from(el.childNodes).some(n => n.nodeType === 3 && n.textContent.trim());
    if (!own) continue;
    const style = getComputedStyle(el);
    if (parseFloat(style.opacity) < 1) continue;
    const a = lum(parse(style.color).slice(0, 3)), b = lum(background(el));
    const ratio = (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
    if (ratio < worst.ratio) worst = {ratio, text: el.textContent.trim().slice(0, 40)};
  }
  return worst;
}"""
