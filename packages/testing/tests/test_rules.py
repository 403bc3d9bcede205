"""Every mixin of the suite names its rule and a documentation section that exists."""

from __future__ import annotations

import re
from pathlib import Path

from chatkeep.testing import StoreConformance
from chatkeep.testing.rules import SECTIONS, rule_for

REPO = Path(__file__).resolve().parents[3]


def _anchors(markdown: str) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens."""
    anchors = set()
    for line in markdown.splitlines():
        heading = re.match(r"#{1,6} (.+)", line)
        if heading:
            text = re.sub(r"[^\w\- ]", "", heading.group(1).strip().lower())
            anchors.add(text.replace(" ", "-"))
    return anchors


def test_every_mixin_has_a_rule_and_a_section() -> None:
    mixins = {c.__name__ for c in StoreConformance.__mro__ if c.__name__.endswith("Tests")}
    assert mixins - set(SECTIONS) == set(), "mixins without a documented rule"
    assert set(SECTIONS) - mixins == set(), "rules of mixins the suite no longer has"
    for name in mixins:
        rule = rule_for(name)
        assert rule is not None and len(rule.text) > 20 and rule.text != name


def test_every_section_is_a_heading_of_its_file() -> None:
    for mixin, see in SECTIONS.items():
        path, anchor = see.split("#", 1)
        assert anchor in _anchors((REPO / path).read_text(encoding="utf-8")), (mixin, see)
