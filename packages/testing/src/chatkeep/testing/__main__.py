"""``python -m chatkeep.testing URL``: run the conformance suite and print the report.

Exits 0 when the store passes everything it declares (level "full"), 1 otherwise. Extra
pytest arguments go after ``--``: ``python -m chatkeep.testing sqlite:///c.db -- -x``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from .runner import run_conformance

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv``, run the suite, print the report, and return the exit status."""
    parser = argparse.ArgumentParser(
        prog="python -m chatkeep.testing",
        description="Run the chatkeep store conformance suite against URL and print a "
        "capability report. The suite writes sessions with random ids: do not point it at "
        "production data.",
    )
    parser.add_argument("url", help="URL of the store to test, e.g. sqlite:///c.db")
    parser.add_argument(
        "--json", action="store_true", help="print the report as JSON instead of a table"
    )
    parser.add_argument(
        "-q", "--quiet", action="store_true", help="hide pytest's own output; print the report"
    )
    parser.add_argument("pytest_args", nargs="*", help="extra pytest arguments (after --)")
    options = parser.parse_args(argv)
    report = run_conformance(
        options.url, extra_args=options.pytest_args, quiet=options.quiet or options.json
    )
    if options.json:
        print(json.dumps(report.as_dict(), indent=2))
    else:
        print()
        print(report.format())
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
