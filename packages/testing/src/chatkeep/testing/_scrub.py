"""Keeping the store URL's secrets out of everything the suite prints or reports.

The suite's tests take the URL as a fixture, build URLs from it and hand it to worker
processes, so its secrets can surface in a traceback's arguments (``chatkeep_url = ...``),
``-l`` locals, assertion rewriting, captured output, warnings and the JSON report.
Rather than hoping every such path masks them, the pytest plugin passes each report
through :class:`Scrubber` before anything shows it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from chatkeep.core.urls import redact_text, redact_url, url_secrets

__all__ = ["ScrubbedRepr", "Scrubber", "scrub_report"]

#: Shorter secrets are hidden only where they stand in a URL or a ``key=value`` pair:
#: replacing every ``ab`` in a traceback would make it unreadable.
_MIN_BARE = 4
_MASK = "***"


@dataclass
class Scrubber:
    """Replaces the secrets of the URLs it was told about, wherever they appear."""

    _urls: dict[str, str] = field(default_factory=dict)
    _secrets: set[str] = field(default_factory=set)

    def add(self, url: object) -> None:
        """Learn the secrets of ``url`` (anything else is ignored)."""
        if not isinstance(url, str) or url in self._urls:
            return
        self._urls[url] = redact_url(url)
        self._secrets.update(s for s in url_secrets(url) if len(s) >= _MIN_BARE)

    @property
    def active(self) -> bool:
        """Whether any URL seen so far had a secret."""
        return any(shown != url for url, shown in self._urls.items()) or bool(self._secrets)

    def __call__(self, text: str) -> str:
        """``text`` without a secret of the known URLs (nor any URL's password)."""
        if not self.active:
            return text
        for url, shown in self._urls.items():
            text = text.replace(url, shown)
        text = redact_text(text)
        for secret in sorted(self._secrets, key=len, reverse=True):
            text = text.replace(secret, _MASK)
            text = _shortened(secret).sub(_MASK, text)
        return text


def _shortened(secret: str) -> re.Pattern[str]:
    """What is left of ``secret`` where pytest shortened a long value in the middle
    (``'memory://app...ter2-s3cret@x'``): a piece of its end right after ``...``, or of its
    start right before it (at least 3 characters)."""
    ends = [re.escape(secret[i:]) for i in range(1, len(secret) - 2)]
    starts = [re.escape(secret[:i]) for i in range(len(secret) - 1, 2, -1)]
    pattern = []
    if ends:
        pattern.append(r"(?<=\.\.\.)(?:" + "|".join(ends) + ")")
    if starts:
        pattern.append("(?:" + "|".join(starts) + r")(?=\.\.\.)")
    return re.compile("|".join(pattern) or "(?!)")


@dataclass
class _Crash:
    path: str
    lineno: int
    message: str


class ScrubbedRepr:
    """A failure's text with the secrets taken out, in place of pytest's own longrepr
    (it prints the same, keeps the one-line crash message, and serializes as text)."""

    def __init__(self, text: str, crash: Any) -> None:
        self.text = text
        self.reprcrash = (
            None
            if crash is None
            else _Crash(str(crash.path), int(crash.lineno), str(getattr(crash, "message", "")))
        )

    def toterminal(self, out: Any) -> None:
        """Write the text (pytest calls this to show a failure)."""
        out.line(self.text)

    def __str__(self) -> str:
        return self.text


def scrub_report(report: Any, scrub: Scrubber) -> None:
    """Take the secrets out of a test or collection report, in place."""
    if not scrub.active:
        return
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:  # a skip: (path, line, reason)
        report.longrepr = (longrepr[0], longrepr[1], scrub(str(longrepr[2])))
    elif longrepr is not None and not isinstance(longrepr, ScrubbedRepr):
        text = str(longrepr)
        crash = getattr(longrepr, "reprcrash", None)
        message = str(getattr(crash, "message", ""))
        if scrub(text) != text or scrub(message) != message:
            scrubbed = ScrubbedRepr(scrub(text), crash)
            if scrubbed.reprcrash is not None:
                scrubbed.reprcrash.message = scrub(message)
            report.longrepr = scrubbed
    report.sections = [(title, scrub(content)) for title, content in report.sections]
