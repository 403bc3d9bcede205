"""The ``chatkeep`` command: ``backends``, ``demo``, ``sessions``, ``chat``, ``conformance``.

Every command that touches a store takes ``--url`` and falls back to ``CHATKEEP_URL``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from chatkeep.core import ChatkeepError, backends

from . import chat, demo, sessions

__all__ = ["main"]


def _cmd_backends(args: argparse.Namespace) -> int:
    found = sorted(backends().values(), key=lambda info: info.name)
    if args.json:
        print(json.dumps([info.as_dict() for info in found], indent=2))
        return 0
    rows = [("NAME", "DISTRIBUTION", "VERSION", "SCHEMES", "CAPABILITIES")]
    for info in found:
        rows.append(
            (
                info.name,
                info.distribution,
                info.version,
                ",".join(info.schemes),
                ",".join(sorted(info.capabilities)) or "-",
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print(
            "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        )
    return 0


def _cmd_conformance(args: argparse.Namespace) -> int:
    from chatkeep.testing import run_conformance

    report = run_conformance(args.url, extra_args=tuple(args.pytest_args or ()))
    print(report.format())
    return 0 if report.ok else 1


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``chatkeep`` command."""
    parser = argparse.ArgumentParser(
        prog="chatkeep", description="Chat-history storage for Python agents."
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    listing = commands.add_parser("backends", help="list installed storage backends")
    listing.add_argument("--json", action="store_true", help="print JSON instead of a table")
    listing.set_defaults(handler=_cmd_backends)

    demo.add_commands(commands)
    sessions.add_commands(commands)
    chat.add_commands(commands)

    conformance = commands.add_parser(
        "conformance", help="run the conformance suite against a store URL"
    )
    conformance.add_argument("url", help="the store to test, e.g. sqlite:///test.db")
    conformance.add_argument(
        "pytest_args", nargs=argparse.REMAINDER, help="extra pytest arguments (after --)"
    )
    conformance.set_defaults(handler=_cmd_conformance)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code: int = args.handler(args)
    except ChatkeepError as exc:
        print(f"chatkeep: error: {exc}", file=sys.stderr)
        return 2
    return code
