"""No acknowledged record is ever lost or duplicated: many writer processes and threads on
every backend, with servers restarted and killed under them, connections cut, and HTTP
faults injected (DESIGN section 10; issue 16). Each run prints its figures."""

from __future__ import annotations

import threading
import uuid
from contextlib import ExitStack
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import pytest
from reliability_check import Outcome, Workload, run_writers
from reliability_proxies import CuttingProxy, FaultyHTTPProxy
from reliability_servers import ThrowawayPostgres, ThrowawayRedis

from chatkeep.testing.services import service_unavailable

pytestmark = pytest.mark.timeout(1200)


def assert_nothing_lost(outcome: Outcome, workload: Workload, *, held: bool = False) -> None:
    """Every acknowledged batch stored once, whole and in order; ``held``: the writers went
    on past ``workload.batches`` until the faults were done (``run_writers(hold=True)``)."""
    expected = workload.processes * workload.threads * workload.batches
    assert outcome.untyped_errors == {}, outcome.untyped_errors
    assert outcome.gave_up == 0
    if held:
        assert outcome.acknowledged_batches >= expected
        expected = outcome.acknowledged_batches
    assert outcome.acknowledged_batches == expected
    assert (outcome.lost, outcome.duplicated, outcome.misordered, outcome.torn_batches) == (
        0,
        0,
        0,
        0,
    )
    assert outcome.stored_records == expected * workload.size


def session() -> str:
    return f"reliability-{uuid.uuid4().hex}"


def with_query(url: str, **params: str) -> str:
    parts = urlsplit(url)
    query = dict(parse_qsl(parts.query, keep_blank_values=True))
    query.update(params)
    return urlunsplit(parts._replace(query=urlencode(query)))


# -- many writers ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "shared_url", ["sqlite", "redis", "postgres", "s3", "azure_blob"], indirect=True
)
def test_many_writers_on_every_backend(
    shared_url: str, tmp_path: Path, scale: float, report: list[str], cleanup: ExitStack
) -> None:
    workload = Workload(processes=4, threads=4, batches=25).scaled(scale)
    url = shared_url
    name = urlsplit(url).scheme
    proxy = None
    if name == "s3":  # moto's conditional writes are not atomic: let one request in at a time
        endpoint = dict(parse_qsl(urlsplit(url).query))["endpoint_url"]
        proxy = FaultyHTTPProxy(endpoint, service="s3", serialize=True)
        cleanup.callback(proxy.close)
        url = with_query(url, endpoint_url=proxy.url)
    outcome = run_writers(url, session(), workload, tmp_path)
    report.append(outcome.summary(f"many writers, {name}"))
    assert_nothing_lost(outcome, workload)


# -- servers restarted and killed --------------------------------------------------------


def _throwaway(kind: str, directory: Path) -> ThrowawayPostgres | ThrowawayRedis:
    server = ThrowawayPostgres(directory) if kind == "postgres" else ThrowawayRedis(directory)
    try:
        server.start()
    except Exception as error:
        service_unavailable(f"could not start a throwaway {kind}: {error}")
    return server


@pytest.mark.parametrize("kind", ["redis", "postgres"])
def test_server_restarted_and_killed_mid_run(
    kind: str, tmp_path: Path, scale: float, report: list[str]
) -> None:
    server = _throwaway(kind, tmp_path / kind)
    workload = Workload(processes=3, threads=3, batches=60).scaled(scale)
    events: list[str] = []

    def disturb(finished: threading.Event) -> None:
        for action in ("restart", "kill", "restart"):
            if finished.wait(1.0):
                return
            getattr(server, action)()
            events.append(action)

    url = server.url + ("?retries=5&retry_backoff=0.05" if kind == "redis" else "")
    try:
        outcome = run_writers(url, session(), workload, tmp_path, during=disturb, hold=True)
    finally:
        server.stop()
    outcome.faults.update(events)
    report.append(outcome.summary(f"{kind} restarted and killed"))
    assert len(events) == 3  # the writers were still running through all three
    assert_nothing_lost(outcome, workload, held=True)


# -- connections cut ---------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["redis", "postgres"])
def test_connections_cut_by_a_proxy(
    kind: str, tmp_path: Path, scale: float, report: list[str]
) -> None:
    server = _throwaway(kind, tmp_path / kind)
    proxy = CuttingProxy(("127.0.0.1", server.port), cut=0.05)
    workload = Workload(processes=3, threads=3, batches=30).scaled(scale)

    def disturb(finished: threading.Event) -> None:
        while not finished.wait(0.3):
            proxy.cut_all()

    url = server.url.replace(f":{server.port}/", f":{proxy.port}/")
    try:
        outcome = run_writers(url, session(), workload, tmp_path, during=disturb)
    finally:
        proxy.close()
        server.stop()
    outcome.faults.update(proxy.faults)
    report.append(outcome.summary(f"{kind} behind a proxy cutting connections"))
    assert proxy.faults["cut all"] + proxy.faults["cut mid-stream"] > 0  # really cut
    assert_nothing_lost(outcome, workload)


# -- HTTP faults on S3 and Azure ---------------------------------------------------------

RATES = {"throttle": 0.08, "error": 0.04, "lost_reply": 0.05, "reset": 0.03, "stall": 0.02}


@pytest.mark.parametrize("shared_url", ["s3", "azure_blob"], indirect=True)
def test_http_faults_on_object_stores(
    shared_url: str, tmp_path: Path, scale: float, report: list[str], cleanup: ExitStack
) -> None:
    name = urlsplit(shared_url).scheme
    query = dict(parse_qsl(urlsplit(shared_url).query))
    if name == "s3":
        proxy = FaultyHTTPProxy(query["endpoint_url"], service="s3", rates=RATES, serialize=True)
        url = with_query(shared_url, endpoint_url=proxy.url, read_timeout="1.5")
    else:
        connection = query["connection_string"]
        endpoint = dict(part.split("=", 1) for part in connection.split(";") if "=" in part)[
            "BlobEndpoint"
        ]
        upstream = endpoint.rsplit("/", 1)[0]
        proxy = FaultyHTTPProxy(upstream, service="azure", rates=RATES)
        url = with_query(
            shared_url, connection_string=connection.replace(upstream, proxy.url), timeout="1.5"
        )
    cleanup.callback(proxy.close)
    workload = Workload(processes=3, threads=3, batches=20).scaled(scale)
    outcome = run_writers(url, session(), workload, tmp_path)
    outcome.faults.update(proxy.faults)
    report.append(outcome.summary(f"{name} behind an HTTP proxy injecting faults"))
    assert sum(proxy.faults.values()) > 0
    assert_nothing_lost(outcome, workload)


# -- a crashed writer's batch re-sent by a new process -----------------------------------

RESEND = """
import sys
from chatkeep.core import Record, open_store
store = open_store(sys.argv[1])
store.append(sys.argv[2], [Record(f"crashed-{n}", b"x" * 100) for n in range(3)])
store.close()
"""


@pytest.mark.parametrize(
    "shared_url", ["sqlite", "redis", "postgres", "s3", "azure_blob"], indirect=True
)
def test_a_batch_resent_by_a_new_process_after_others_appended(
    shared_url: str, report: list[str]
) -> None:
    """The usual retry after a crash: the first process's append was applied but it died
    before it knew; other writers appended (well past any cache of recent ids); a new
    process sends the same batch again. Nothing new may be stored."""
    import subprocess
    import sys

    from chatkeep.core import Record, open_store

    chat = session()
    subprocess.run([sys.executable, "-c", RESEND, shared_url, chat], check=True, timeout=120)
    with open_store(shared_url) as others:
        for number in range(40):  # about 16 KiB of later data, in 40 appends
            others.append(chat, [Record(f"later-{number}-{n}", b"y" * 100) for n in range(4)])
    subprocess.run([sys.executable, "-c", RESEND, shared_url, chat], check=True, timeout=120)
    with open_store(shared_url) as store:
        ids = [record.id for record in store.read(chat)]
    duplicated = len(ids) - len(set(ids))
    report.append(
        f"crashed writer's batch re-sent by a new process, {urlsplit(shared_url).scheme}: "
        f"{len(ids)} records stored (163 expected), duplicated {duplicated}"
    )
    assert len(ids) == 163 and duplicated == 0
