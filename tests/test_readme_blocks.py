"""Every ```python block of every README.md runs as written.

Each block (root, core/, plugins/*, packages/*, benchmarks/) runs in a fresh Python
process from an empty temporary folder, so relative paths such as ``sqlite:///chats.db``
land there; a failure names the README and the line of the block.

A block that needs something says so in an HTML comment on the line right before it
(invisible on a rendered page), with one or more marks::

    <!-- run: redis -->              a Redis server (CHATKEEP_TEST_REDIS_URL, else the local one)
    <!-- run: postgres -->           a PostgreSQL server (CHATKEEP_TEST_POSTGRES_URL, ...)
    <!-- run: s3 -->                 an S3 endpoint (moto, started here; or CHATKEEP_TEST_S3_URL)
    <!-- run: azure -->              an Azure Blob endpoint (Azurite)
    <!-- run: fake-model -->         the fake model server (chatkeep.fake_model), with
                                     OPENAI_BASE_URL / ANTHROPIC_BASE_URL and dummy keys
                                     pointing the official SDKs at it
    <!-- run: continues -->          the block continues the README's previous block (both
                                     run together, in order, with the marks of both)
    <!-- run: skip reason="..." -->  a fragment on purpose: not run (keep these few)

Service marks point the block's store URLs at the test server: each string literal with the
service's scheme keeps its options but gets the test server's address and a namespace (or
schema, bucket prefix) of its own, removed afterwards; for Azure the whole URL is the test
one (the block's account and credential do not exist on Azurite). Through the
``chatkeep.testing.servers`` helpers, a missing service skips outside CI and fails under
``CI=true``. An unknown mark fails, so a typo cannot hide a block.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import pytest

REPO = Path(__file__).resolve().parents[1]
#: The READMEs whose blocks run (every member's, the root's, the benchmarks').
_PATTERNS = ("README.md", "core/README.md", "plugins/*/README.md", "packages/*/README.md")
READMES = [
    *sorted(path for pattern in _PATTERNS for path in REPO.glob(pattern)),
    REPO / "benchmarks" / "README.md",
]
SERVICES = ("redis", "postgres", "s3", "azure", "fake-model")
MARKS = frozenset({*SERVICES, "continues", "skip"})
#: At most this many blocks may be skipped as fragments.
MAX_SKIPPED = 3
TIMEOUT = 600  # seconds per block (the conformance runner's example runs a whole suite)

_FENCE = re.compile(r"^```python\s*$")
_MARK_LINE = re.compile(r"^<!--\s*run:(.*?)-->\s*$")
_MARK = re.compile(r'\s*([a-z0-9-]+)(?:="([^"]*)")?')


@dataclass(frozen=True)
class Block:
    """One python block: where it is, its code (with the blocks it continues) and marks."""

    readme: Path
    line: int  # the first line of code, 1-based
    code: str
    marks: frozenset[str] = frozenset()
    reason: str | None = None
    problems: tuple[str, ...] = field(default=())

    @property
    def where(self) -> str:
        return f"{self.readme.relative_to(REPO)}:{self.line}"


def _parse_marks(text: str) -> tuple[set[str], str | None, list[str]]:
    """The marks of ``<!-- run: ... -->`` (``skip`` takes ``reason="..."``)."""
    marks: set[str] = set()
    reason = None
    problems = []
    position = 0
    text = text.strip()
    while position < len(text):
        found = _MARK.match(text, position)
        if not found or found.end() == position:
            problems.append(f"cannot read the run marks {text!r}")
            break
        name, value = found.group(1), found.group(2)
        position = found.end()
        if name == "reason":
            reason = value
        elif name not in MARKS:
            problems.append(f"unknown run mark {name!r} (known: {', '.join(sorted(MARKS))})")
        elif value is not None:
            problems.append(f"run mark {name!r} takes no value")
        else:
            marks.add(name)
    if "skip" in marks and not reason:
        problems.append('skip needs a reason: <!-- run: skip reason="..." -->')
    if reason is not None and "skip" not in marks:
        problems.append("reason belongs to skip")
    return marks, reason, problems


def blocks_of(readme: Path) -> list[Block]:
    """The python blocks of one README, continuations joined to what they continue."""
    lines = readme.read_text(encoding="utf-8").splitlines()
    found: list[Block] = []
    index = 0
    while index < len(lines):
        if not _FENCE.match(lines[index]):
            index += 1
            continue
        end = index + 1
        while end < len(lines) and not lines[end].startswith("```"):
            end += 1
        code = "\n".join(lines[index + 1 : end]) + "\n"
        marks: set[str] = set()
        reason = None
        problems: list[str] = []
        previous = lines[index - 1] if index else ""
        mark_line = _MARK_LINE.match(previous.strip())
        if mark_line:
            marks, reason, problems = _parse_marks(mark_line.group(1))
        if "continues" in marks:
            if not found:
                problems.append("continues, but no block comes before it")
            else:
                before = found[-1]
                code = before.code + "\n" + code
                marks |= before.marks - {"skip"}
        if "skip" in marks and marks - {"skip"}:
            problems.append("a skipped block takes no other mark")
        found.append(Block(readme, index + 2, code, frozenset(marks), reason, tuple(problems)))
        index = end + 1
    return found


ALL_BLOCKS = [block for readme in READMES if readme.exists() for block in blocks_of(readme)]


# -- pointing a block at the test services ------------------------------------------------


def _literal(scheme: str) -> re.Pattern[str]:
    return re.compile(rf"""(["'])((?:{scheme})://[^"'\s]*)\1""")


def _merged(original: str, test_url: str) -> str:
    """``test_url``'s address and query, with the options of ``original`` it does not set."""
    query = dict(parse_qsl(urlsplit(original).query, keep_blank_values=True))
    query.update(parse_qsl(urlsplit(test_url).query, keep_blank_values=True))
    return urlunsplit(urlsplit(test_url)._replace(query=urlencode(query)))


def _retarget(code: str, scheme: str, convert: Callable[[str], str]) -> str:
    def replace(found: re.Match[str]) -> str:
        quote = found.group(1)
        return quote + convert(found.group(2)) + quote

    return _literal(scheme).sub(replace, code)


def prepare(block: Block, cleanup: ExitStack, workdir: Path) -> tuple[str, dict[str, str]]:
    """The code to run and its environment, with the services the block's marks name."""
    from chatkeep.testing import servers

    code = block.code
    env = {key: value for key, value in os.environ.items() if key != "CHATKEEP_URL"}
    if "redis" in block.marks:
        url = servers.redis_store_url(cleanup)
        code = _retarget(code, "redis|rediss", lambda original: _merged(original, url))
    if "postgres" in block.marks:
        url = servers.postgres_store_url(cleanup)
        code = _retarget(code, "postgresql|postgres", lambda original: _merged(original, url))
    if "s3" in block.marks:
        url = servers.s3_store_url(cleanup)
        code = _retarget(code, "s3", lambda original: _merged(original, url))
        env.update({k: v for k, v in os.environ.items() if k.startswith("AWS_")})
    if "azure" in block.marks:
        url = servers.azure_store_url(cleanup, workdir / "azurite", REPO)
        code = _retarget(code, "azblob", lambda original: url)
    if "fake-model" in block.marks:
        from chatkeep.fake_model import FakeModelServer

        server = cleanup.enter_context(FakeModelServer())
        env.update(
            OPENAI_BASE_URL=server.base_url,
            OPENAI_API_KEY="test",
            ANTHROPIC_BASE_URL=server.anthropic_base_url,
            ANTHROPIC_API_KEY="test",
        )
    return code, env


def _ids(blocks: list[Block]) -> Iterator[str]:
    for block in blocks:
        yield block.where


@pytest.mark.parametrize("block", ALL_BLOCKS, ids=list(_ids(ALL_BLOCKS)))
def test_readme_block_runs(block: Block, tmp_path: Path) -> None:
    assert not block.problems, f"{block.where}: " + "; ".join(block.problems)
    if "skip" in block.marks:
        pytest.skip(f"{block.where}: a fragment on purpose: {block.reason}")
    workdir = tmp_path / "cwd"
    workdir.mkdir()
    with ExitStack() as cleanup:
        code, env = prepare(block, cleanup, tmp_path)
        script = tmp_path / "block.py"
        script.write_text(code, encoding="utf-8")
        try:
            done = subprocess.run(
                [sys.executable, str(script)],
                cwd=workdir,
                env=env,
                capture_output=True,
                text=True,
                timeout=TIMEOUT,
                check=False,
            )
        except subprocess.TimeoutExpired:
            pytest.fail(f"{block.where}: did not finish in {TIMEOUT} s")
    if done.returncode != 0:
        pytest.fail(
            f"{block.where}: the block failed (exit {done.returncode}; run it with "
            f"{shlex.quote(sys.executable)} from an empty folder)\n"
            f"--- stderr ---\n{done.stderr[-4000:]}\n--- stdout ---\n{done.stdout[-2000:]}",
            pytrace=False,
        )


def test_every_readme_is_read_and_skips_are_few(capsys: pytest.CaptureFixture[str]) -> None:
    missing = [str(path.relative_to(REPO)) for path in READMES if not path.exists()]
    assert not missing, f"READMEs not found: {missing}"
    assert len(ALL_BLOCKS) > 30, "the block extraction finds too little"
    skipped = [block for block in ALL_BLOCKS if "skip" in block.marks]
    assert len(skipped) <= MAX_SKIPPED, [f"{b.where}: {b.reason}" for b in skipped]
    with capsys.disabled():
        print(
            f"\nREADME python blocks: {len(ALL_BLOCKS) - len(skipped)} run, "
            f"{len(skipped)} skipped as fragments"
            + "".join(f"\n  skipped {b.where}: {b.reason}" for b in skipped)
        )


def test_marks_are_read() -> None:
    readme = REPO / "tests" / "_marks_example.md"
    text = (
        "intro\n<!-- run: redis continues -->\n```python\nx = 1\n```\n"
        '<!-- run: skip reason="a fragment" -->\n```python\ny\n```\n'
        "<!-- run: reddis -->\n```python\nz = 1\n```\n"
    )
    try:
        readme.write_text(text, encoding="utf-8")
        first, second, third = blocks_of(readme)
    finally:
        readme.unlink()
    assert first.marks == {"redis", "continues"} and first.problems  # nothing to continue
    assert (first.line, first.code) == (4, "x = 1\n")
    assert second.marks == {"skip"} and second.reason == "a fragment" and not second.problems
    assert third.problems and "reddis" in third.problems[0]


def test_urls_are_pointed_at_the_test_server() -> None:
    code = 'open_store("redis://127.0.0.1:6379/0?namespace=myapp&ttl=604800")\n'
    test = "redis://10.0.0.1:6380/10?namespace=ck-test-1"
    out = _retarget(code, "redis|rediss", lambda original: _merged(original, test))
    assert out == 'open_store("redis://10.0.0.1:6380/10?namespace=ck-test-1&ttl=604800")\n'
