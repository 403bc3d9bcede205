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


def _conformance(argv: Sequence[str]) -> int:
    # The runner's own command line, so options go in any order and `--` hands the rest
    # to pytest exactly as with `python -m chatkeep.testing`.
    try:
        from chatkeep.testing.__main__ import main as run
    except ImportError:
        print(
            "chatkeep: error: the conformance suite is not installed: pip install chatkeep-testing",
            file=sys.stderr,
        )
        return 2
    return run(argv, prog="chatkeep conformance")


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

    # Listed for --help; `main` hands its arguments to the runner's own parser.
    commands.add_parser(
        "conformance",
        help="run the conformance suite against a store URL "
        "(chatkeep conformance URL [--json] [--keep-sessions] [-- PYTEST-ARGS])",
        add_help=False,
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    if arguments[:1] == ["conformance"]:
        return _conformance(arguments[1:])
    parser = build_parser()
    args = parser.parse_args(arguments)
    try:
        code: int = args.handler(args)
    except ChatkeepError as exc:
        print(f"chatkeep: error: {exc}", file=sys.stderr)
        return 2
    return code
