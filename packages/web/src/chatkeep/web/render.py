"""Stored content as safe HTML: every byte of a store is untrusted.

Text goes through markdown-it with raw HTML off (a ``<script>`` in a message is shown as
text), its link checker on (no ``javascript:``, ``vbscript:``, ``file:`` or ``data:``
links), images off (a message cannot make the browser fetch anything) and every link
``rel="noopener noreferrer nofollow"``. Everything else is handed to Jinja2, which escapes
it (autoescape is on for every template). Media is shown inline only for raster image types
a browser cannot run script in; everything else (SVG, HTML, PDF, ...) is a download served
as ``attachment`` with ``nosniff`` and a sandboxing CSP.
"""

from __future__ import annotations

import functools
import json
from typing import Any

from markdown_it import MarkdownIt
from markupsafe import Markup

__all__ = ["INLINE_MEDIA", "markdown", "pretty_json", "safe_link"]

#: Media types shown inline (``<img>``): raster images only. SVG is not among them.
INLINE_MEDIA = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})

_markdown = MarkdownIt("js-default", {"html": False, "linkify": False, "typographer": False})
_markdown.disable(["image"])


def _link_open(renderer: Any, tokens: Any, index: int, options: Any, env: Any) -> str:
    tokens[index].attrSet("rel", "noopener noreferrer nofollow")
    rendered: str = renderer.renderToken(tokens, index, options, env)
    return rendered


_markdown.add_render_rule("link_open", _link_open)


#: Texts up to this long are rendered once and remembered (a page shown again renders the
#: same messages); longer ones every time.
CACHED_TEXT = 4096


@functools.lru_cache(maxsize=2048)
def _cached(text: str) -> str:
    rendered: str = _markdown.render(text)
    return rendered


def markdown(text: str) -> Markup:
    """``text`` as HTML: CommonMark with raw HTML escaped and unsafe links left as text."""
    rendered = _cached(text) if len(text) <= CACHED_TEXT else _markdown.render(text)
    return Markup(rendered)  # noqa: S704 (markdown-it escapes; html is off)


def pretty_json(value: Any) -> str:
    """A JSON value (or a string holding JSON) indented, for a ``<pre>`` (escaped later)."""
    if isinstance(value, str):
        text = value
        try:
            value = json.loads(text)
        except ValueError:
            return text
    try:
        return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False, default=repr)
    except (TypeError, ValueError):
        return repr(value)


def safe_link(uri: str) -> str | None:
    """``uri`` when a click on it can only navigate (``http``/``https``), else ``None``."""
    head = uri.strip().lower()
    return uri if head.startswith(("https://", "http://")) else None
