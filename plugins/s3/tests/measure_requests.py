"""Count the S3 requests of the operations whose cost must not grow with a session's length.

Not a test (pytest does not collect it): a measurement, run by hand against a throwaway moto
server, or against the endpoint in ``CHATKEEP_TEST_S3_URL``::

    python plugins/s3/tests/measure_requests.py 1000 10000

For each size it grows one session by single-record appends from one handle, then counts
(client side, through botocore's ``before-call`` events) what a *new* handle pays for its
first ``read(-50)``, its first ``append`` and a full read, and what ``compact()`` costs.
Options given as ``name=value`` after the sizes go to every store (for example
``rollover_segments=8``).
"""

from __future__ import annotations

import logging
import os
import sys
import time
import uuid
from collections import Counter
from typing import Any

from chatkeep.core import Record, open_store


def _count(store: Any) -> Counter[str]:
    counter: Counter[str] = Counter()

    def on_call(model: Any, **_: Any) -> None:
        counter[model.name] += 1

    store.backend.bucket.client.meta.events.register("before-call.s3", on_call)
    return counter


def _show(counter: Counter[str]) -> str:
    total = sum(counter.values())
    parts = ", ".join(f"{name} {n}" for name, n in sorted(counter.items()))
    return f"{total:5d} requests ({parts})"


def _url() -> tuple[str, Any]:
    configured = os.environ.get("CHATKEEP_TEST_S3_URL")
    if configured:
        return configured.rstrip("/") + f"/measure-{uuid.uuid4().hex[:8]}", None
    import boto3
    from moto.server import ThreadedMotoServer

    os.environ.setdefault("AWS_ACCESS_KEY_ID", "measure")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "measure")
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    bucket = f"measure-{uuid.uuid4().hex[:8]}"
    boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1").create_bucket(Bucket=bucket)
    return f"s3://{bucket}/m?endpoint_url={endpoint}&region=us-east-1", server


_OLD = Record("r0000001", b"x" * 200)


def measure(url: str, size: int, options: dict[str, Any]) -> None:
    """Grow a session to ``size`` single-record appends and print what each step costs."""
    session = f"s{size}"
    writer = open_store(url, **options)
    counter = _count(writer)
    started = time.perf_counter()
    for n in range(size):
        writer.append(session, [Record(f"r{n:07d}", b"x" * 200)])
    fill = time.perf_counter() - started
    writer.close()
    print(f"-- {size} appends from one handle: {fill:.1f} s, {_show(counter)}")
    steps: list[tuple[str, Any]] = [
        ("cold read(-50)", lambda store: store.read(session, -50)),
        ("cold append", lambda store: store.append(session, [Record("new-a", b"y")])),
        ("cold full read", lambda store: store.read(session)),
        (
            "cold retry of an old id",
            lambda store: store.append(session, [Record("r0000001", b"x" * 200)]),
        ),
    ]
    for label, step in steps:
        store = open_store(url, **options)
        counter = _count(store)
        started = time.perf_counter()
        step(store)
        elapsed = time.perf_counter() - started
        print(f"{label:28s} {_show(counter)}  {elapsed * 1e3:8.1f} ms")
        store.close()
    store = open_store(url, **options)
    counter = _count(store)
    started = time.perf_counter()
    store.backend.compact(session)
    print(f"{'compact()':28s} {_show(counter)}  {(time.perf_counter() - started) * 1e3:8.1f} ms")
    store.close()
    store = open_store(url, **options)
    counter = _count(store)
    store.read(session, -50)
    print(f"{'cold read(-50) after compact':28s} {_show(counter)}")
    store.close()


def main(argv: list[str]) -> None:
    """``measure_requests.py SIZE... [option=value...]``."""
    sizes = [int(arg) for arg in argv if "=" not in arg] or [1000]
    options: dict[str, Any] = {}
    for arg in argv:
        if "=" in arg:
            name, _, value = arg.partition("=")
            options[name] = int(value) if value.isdigit() else value
    url, server = _url()
    try:
        for size in sizes:
            measure(url, size, options)
    finally:
        if server is not None:
            server.stop()


if __name__ == "__main__":
    main(sys.argv[1:])
