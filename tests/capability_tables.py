"""Writes the capability lists of the READMEs from what the backends declare.

The root README's backend table (its ``capabilities`` column for the backends it lists
there) and each plugin README's ``Capabilities:`` line are generated from
``chatkeep.core.backends()``, so they never drift from the code::

    .venv/bin/python tests/capability_tables.py           # rewrite the READMEs
    .venv/bin/python tests/capability_tables.py --check   # exit 1 naming what differs

``tests/test_capability_tables.py`` fails when a README is not what this writes.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from chatkeep.core import backends

REPO = Path(__file__).resolve().parents[1]

#: The order the READMEs list capabilities in (every capability, once).
ORDER = (
    "delete",
    "list_sessions",
    "close",
    "ttl",
    "shared",
    "durable",
    "conditional",
    "namespace",
    "recent",
    "fulltext",
)

#: Root README row label -> backend name.
ROOT_ROWS = {"memory (built in)": "memory", "SQLite (the embedded default)": "sqlite"}
#: Plugin folder -> backend name, for the folders whose README has a ``Capabilities:`` line.
PLUGIN_READMES = {"sqlite": "sqlite", "redis": "redis", "postgres": "postgres", "s3": "s3"}

_CAPABILITY_LINE = re.compile(r"^(Capabilities: )((?:`\w+`,?\s*)+)", re.M)
_NAME = re.compile(r"`(\w+)`")


def declared(backend: str) -> list[str]:
    """What ``backend`` declares, in README order."""
    return [c for c in ORDER if c in backends()[backend].capabilities]


def render_root(text: str) -> str:
    """The root README with the last cell of each :data:`ROOT_ROWS` row generated."""
    lines = text.splitlines(keepends=True)
    for label, backend in ROOT_ROWS.items():
        rows = [n for n, line in enumerate(lines) if line.startswith(f"| {label} |")]
        if len(rows) != 1:
            raise LookupError(f"README.md has {len(rows)} rows labelled {label!r}, not one")
        row = lines[rows[0]]
        ending = row[len(row.rstrip("\r\n")) :]
        head = row.rstrip(" |\r\n").rsplit("|", 1)[0]
        lines[rows[0]] = f"{head}| {', '.join(declared(backend))} |{ending}"
    return "".join(lines)


def render_plugin(text: str, backend: str) -> str:
    """A plugin README with its ``Capabilities:`` list generated; the line breaks of the
    list are kept when it names as many capabilities as before."""
    match = _CAPABILITY_LINE.search(text)
    if match is None:
        raise LookupError("no 'Capabilities:' line")
    shown = match.group(2)
    expected = iter(declared(backend))
    if len(_NAME.findall(shown)) == len(declared(backend)):
        listed = _NAME.sub(lambda _: f"`{next(expected)}`", shown)
    else:
        trailing = shown[len(shown.rstrip()) :]
        listed = ", ".join(f"`{name}`" for name in expected) + trailing
    return text[: match.start(2)] + listed + text[match.end(2) :]


def generated() -> dict[Path, str]:
    """Each README this script writes -> its text as generated."""
    root = REPO / "README.md"
    texts = {root: render_root(root.read_text(encoding="utf-8"))}
    for folder, backend in PLUGIN_READMES.items():
        path = REPO / "plugins" / folder / "README.md"
        texts[path] = render_plugin(path.read_text(encoding="utf-8"), backend)
    return texts


def main(argv: list[str]) -> int:
    """Rewrite the READMEs (or, with ``--check``, name those that differ and exit 1)."""
    check = argv == ["--check"]
    if argv and not check:
        print("usage: capability_tables.py [--check]", file=sys.stderr)
        return 2
    stale = []
    for path, text in generated().items():
        if path.read_text(encoding="utf-8") != text:
            stale.append(path.relative_to(REPO).as_posix())
            if not check:
                path.write_text(text, encoding="utf-8")
    for name in stale:
        print(f"{'differs' if check else 'rewrote'}: {name}")
    return 1 if check and stale else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
