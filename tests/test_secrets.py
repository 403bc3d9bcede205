"""No secret anywhere (issue 16, item 6): every credential form each backend accepts, tried
on a server that is not there, must not show in the store's repr, in any error it raises
(its message, its causes, its traceback), in any log line (DEBUG, the drivers' loggers
included) or in the CLI's output."""

from __future__ import annotations

import logging
import socket
import subprocess
import sys
import traceback
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import pytest

from chatkeep.core import InvalidOption, open_store

SECRET = "Sup3rS3cret-hunter2"
ENCODED = quote(SECRET, safe="")


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


PORT = closed_port()
AZURE_KEY = "QUJD" + "x" * 80 + "=="  # base64-shaped, like an account key
SAS = f"sv=2021-12-02&ss=b&srt=co&sp=rwdl&se=2030-01-01&sig={ENCODED}"

#: (name, URL, keyword options): every form the backends document for credentials.
FORMS: list[tuple[str, str, dict[str, Any]]] = [
    ("postgres password in the URL", f"postgresql://app:{ENCODED}@127.0.0.1:{PORT}/db", {}),
    (
        "postgres password in the query",
        f"postgresql://app@127.0.0.1:{PORT}/db?password={ENCODED}",
        {},
    ),
    ("redis password in the URL", f"redis://:{ENCODED}@127.0.0.1:{PORT}/0", {}),
    ("redis user and password in the URL", f"redis://app:{ENCODED}@127.0.0.1:{PORT}/0", {}),
    ("redis password in the query", f"redis://127.0.0.1:{PORT}/0?password={ENCODED}", {}),
    ("redis password keyword", f"redis://127.0.0.1:{PORT}/0", {"password": SECRET}),
    ("redis cluster password", f"redis+cluster://:{ENCODED}@127.0.0.1:{PORT}", {}),
    (
        "s3 credentials in a nested endpoint URL",
        f"s3://bucket/p?endpoint_url=http://app:{ENCODED}@127.0.0.1:{PORT}&region=us-east-1",
        {},
    ),
    (
        "s3 secret key keyword",
        f"s3://bucket/p?endpoint_url=http://127.0.0.1:{PORT}&region=us-east-1",
        {"aws_access_key_id": "AKIAEXAMPLE", "aws_secret_access_key": SECRET},
    ),
    (
        "s3 session token keyword",
        f"s3://bucket/p?endpoint_url=http://127.0.0.1:{PORT}&region=us-east-1",
        {
            "aws_access_key_id": "AKIAEXAMPLE",
            "aws_secret_access_key": "x" * 20,
            "aws_session_token": SECRET,
        },
    ),
    (
        "azure connection string with an account key",
        "azblob://chats/p?connection_string="
        + quote(
            f"DefaultEndpointsProtocol=http;AccountName=dev;AccountKey={SECRET}{AZURE_KEY};"
            f"BlobEndpoint=http://127.0.0.1:{PORT}/dev",
            safe="",
        ),
        {},
    ),
    (
        "azure account key keyword",
        f"azblob://chats/p?account_url=http://127.0.0.1:{PORT}/dev",
        {"account_key": SECRET + AZURE_KEY},
    ),
    (
        "azure SAS token keyword",
        f"azblob://chats/p?account_url=http://127.0.0.1:{PORT}/dev",
        {"sas_token": SAS},
    ),
    (
        "azure SAS in the account URL",
        "azblob://chats/p?account_url=" + quote(f"http://127.0.0.1:{PORT}/dev?{SAS}", safe=""),
        {},
    ),
    (
        "encryption keys keyword over a server store",
        f"encrypted+redis://:{ENCODED}@127.0.0.1:{PORT}/0",
        {"keys": "k1:" + "A" * 43},
    ),
]

#: Options that make the failures come fast (no long retry loops against a closed port).
FAST = {
    "redis": {"retries": 0},
    "postgresql": {},
    "s3": {"retries": 1, "connect_timeout": 1, "read_timeout": 1},
    "azblob": {"retries": 0, "connect_timeout": 1, "timeout": 1},
}


def fast(url: str) -> dict[str, Any]:
    scheme = url.split("://", 1)[0].rsplit("+", maxsplit=1)[-1]
    scheme = "redis" if scheme in ("redis", "cluster") else scheme
    return dict(FAST.get(scheme, {}))


@pytest.fixture
def logs() -> Iterator[list[str]]:
    """Everything logged at DEBUG by any logger (the drivers' own included)."""
    lines: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(self.format(record))

    handler = Collect(logging.DEBUG)
    handler.setFormatter(logging.Formatter("%(name)s %(message)s %(args)s"))
    root = logging.getLogger()
    previous = root.level
    root.setLevel(logging.DEBUG)
    root.addHandler(handler)
    try:
        yield lines
    finally:
        root.removeHandler(handler)
        root.setLevel(previous)


def shows_secret(text: str) -> bool:
    return SECRET in text or ENCODED in text or SECRET[:12] in text


@pytest.mark.parametrize(("name", "url", "options"), FORMS, ids=[form[0] for form in FORMS])
def test_credentials_never_show(
    name: str, url: str, options: dict[str, Any], logs: list[str]
) -> None:
    texts: list[str] = []
    options = {**fast(url), **options}
    # A backend may refuse a form (S3 refuses credentials inside endpoint_url: requests are
    # signed with AWS credentials), with InvalidOption; then its error is what is looked at.
    # Anything else opens (the server is only needed by the operations), so the repr, the
    # errors of real operations and the logs are all looked at.
    try:
        store = open_store(url, **options)
    except InvalidOption as refused:
        assert not set(fast(url)) & set(str(refused).split()), refused  # not our fast options
        texts += [str(refused), repr(refused), "".join(traceback.format_exception(refused))]
    else:
        texts += [repr(store), str(store.url), repr(store.backend)]
        for operation in (
            lambda: store.read("s", -1),
            lambda: store.append("s", [("r", b"x")]),
        ):
            try:
                operation()
            except Exception as error:
                texts += [str(error), repr(error), "".join(traceback.format_exception(error))]
        store.close()
    texts += logs
    leaked = [text for text in texts if shows_secret(text)]
    assert leaked == [], f"{name}: the secret shows in {leaked[0][:400]!r}"


@pytest.mark.parametrize(
    ("name", "url"),
    [(name, url) for name, url, options in FORMS if not options],
    ids=[name for name, _, options in FORMS if not options],
)
def test_the_cli_never_shows_credentials(name: str, url: str) -> None:
    for command in (["sessions", "list", "--url", url], ["sessions", "show", "s", "--url", url]):
        done = subprocess.run(
            [sys.executable, "-m", "chatkeep.cli", *command],
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )
        output = done.stdout + done.stderr
        assert not shows_secret(output), f"{name}: {command[:2]} printed {output[:400]!r}"


@pytest.mark.parametrize(
    ("name", "url"),
    [(name, url) for name, url, _ in FORMS if name.endswith("password in the URL")],
    ids=[name for name, _, _ in FORMS if name.endswith("password in the URL")],
)
def test_conformance_on_a_store_that_does_not_answer_is_one_line(name: str, url: str) -> None:
    # Opening connects to nothing yet on these backends: the runner must read once before
    # running the suite (which took minutes and printed the URL in every traceback).
    done = subprocess.run(
        [sys.executable, "-m", "chatkeep.cli", "conformance", url],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-2000:]
    assert done.stdout == "" and done.stderr.count("\n") == 1, done.stderr
    assert "could not open the store" in done.stderr
    assert not shows_secret(done.stderr), done.stderr
