"""``python -m chatkeep.testing URL``: run the conformance suite and print the report.

Exits 0 when the store passes everything it declares (level ``full``), 1 when it does not
(``partial``, ``failed``), 2 when the store could not be opened or the command line is
wrong, and 130 when the run was interrupted. Options go anywhere before ``--``; what follows
``--`` goes to pytest: ``python -m chatkeep.testing sqlite:///c.db --json -- -x``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

__all__ = ["build_parser", "main"]

#: Exit status when the run was interrupted (128 + SIGINT, as shells report Ctrl-C).
EXIT_INTERRUPTED = 130
#: Exit status when the suite could not run at all (the store did not open).
EXIT_NOT_RUN = 2


def build_parser(prog: str = "python -m chatkeep.testing") -> argparse.ArgumentParser:
    """The command line of the runner (``chatkeep conformance`` uses the same)."""
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Run the chatkeep store conformance suite against URL and print a "
        "capability report. The suite writes sessions with random ids and deletes them "
        "afterwards when the store declares delete: do not point it at production data.",
        epilog="Arguments after -- go to pytest, e.g. `-- -x` or `-- -k Slice` (a narrowed "
        "run reports level partial, never full).",
    )
    parser.add_argument("url", help="URL of the store to test, e.g. sqlite:///c.db")
    parser.add_argument(
        "--json", action="store_true", help="print the report as JSON instead of a table"
    )
    parser.add_argument(
        "-q", "--quiet", action="store_true", help="hide pytest's own output; print the report"
    )
    parser.add_argument(
        "--keep-sessions",
        action="store_true",
        help="keep the sessions the suite wrote (for debugging) instead of deleting them",
    )
    return parser


def main(argv: Sequence[str] | None = None, *, prog: str = "python -m chatkeep.testing") -> int:
    """Parse ``argv``, run the suite, print the report, and return the exit status."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    pytest_args: list[str] = []
    if "--" in arguments:
        split = arguments.index("--")
        arguments, pytest_args = arguments[:split], arguments[split + 1 :]
    options = build_parser(prog).parse_args(arguments)

    from .runner import run_conformance

    report = run_conformance(
        options.url,
        extra_args=pytest_args,
        quiet=options.quiet or options.json,
        keep_sessions=options.keep_sessions,
    )
    if options.json:
        print(json.dumps(report.as_dict(), indent=2))
    elif report.backend is None:  # nothing ran: one line, not a table of zeros
        print(f"{prog}: {' '.join(str(report.error).split())}", file=sys.stderr)
    else:
        print()
        print(report.format())
    if report.interrupted:
        return EXIT_INTERRUPTED
    if report.backend is None:
        return EXIT_NOT_RUN
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
