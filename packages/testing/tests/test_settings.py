"""The suite's size knobs: defaults that catch the bugs they are for, options that change
them, and the opt-out."""

from __future__ import annotations

import pytest

from chatkeep.testing import SuiteSettings, run_conformance
from chatkeep.testing.settings import DEFAULTS, from_options


def test_defaults_catch_the_named_bugs() -> None:
    assert DEFAULTS.volume_mib > 64, "past a 10 MiB and a 64 MiB cap"
    assert DEFAULTS.listing_sessions > 2 * 1000, "two boundaries of 1,000-entry pages"
    assert DEFAULTS.tail_records >= 10_000, "a scan of the log is far slower than a tail"
    assert DEFAULTS.keep_sessions is False


def test_options_override_and_validate() -> None:
    assert from_options({"volume_mib": 0, "processes": None}) == SuiteSettings(volume_mib=0)
    with pytest.raises(ValueError, match="processes"):
        from_options({"processes": 1})
    with pytest.raises(ValueError, match="listing-sessions"):
        from_options({"listing_sessions": -1})


def test_a_switched_off_test_leaves_its_row_incomplete() -> None:
    report = run_conformance(
        "memory://", extra_args=["--chatkeep-volume-mib=0", "-k", "volume"], quiet=True
    )
    (outcome,) = report.outcomes
    assert outcome.outcome == "skipped" and "switched off" in outcome.message
    assert report.capability("core").status in ("incomplete", "untested")
    assert report.level == "partial"
