"""chatkeep benchmark harness (DESIGN section 8): chatkeep vs the raw driver vs peer
libraries, per backend, side by side in one run.

    python benchmarks/run.py [--quick] [--backends sqlite,redis,postgres]
                             [--lengths 10,1000,10000] [--json results.json]

or ``nox -s bench -- --quick``. See benchmarks/README.md for what each row means.
Servers: PostgreSQL at 127.0.0.1:5432 (db ``test``) and Redis at 127.0.0.1:6379, or
``CHATKEEP_TEST_POSTGRES_URL`` / ``CHATKEEP_TEST_REDIS_URL``; moto (s3) and Azurite
(azure_blob) are started here, on loopback, only when those backends are asked for.
Everything the run writes lives in a throwaway schema / key prefix / folder and is removed
at the end.
"""

from __future__ import annotations

import argparse
import datetime as dt
import gc
import importlib.metadata
import json
import logging
import os
import platform
import secrets
import shutil
import signal
import sys
import tempfile
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from chatkeep_bench.backends import BACKENDS, Context, ServiceMissing, setup
from chatkeep_bench.measure import Runner
from chatkeep_bench.report import (
    BackendResult,
    Row,
    format_backend,
    format_markdown,
    format_summary,
    format_targets,
)
from chatkeep_bench.variants import AnyVariant, Unavailable
from chatkeep_bench.workload import Settings

DEFAULT_BACKENDS = "sqlite,redis,postgres"
VERSIONS = [
    "chatkeep-core",
    "openai-agents",
    "langchain-community",
    "langchain-postgres",
    "langchain-redis",
    "agent-framework-core",
    "agent-framework-redis",
]


def _ints(value: str) -> tuple[int, ...]:
    try:
        numbers = tuple(int(part.replace("_", "")) for part in value.split(",") if part)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of integers: {value!r}") from None
    if not numbers or min(numbers) < 1:
        raise argparse.ArgumentTypeError("lengths must be positive integers")
    return tuple(sorted(set(numbers)))


def _names(value: str) -> list[str]:
    names = [part.strip() for part in value.split(",") if part.strip()]
    unknown = [name for name in names if name not in BACKENDS]
    if unknown:
        raise argparse.ArgumentTypeError(
            f"unknown backend(s) {', '.join(unknown)}; choose from {', '.join(BACKENDS)}"
        )
    return names


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a short run (< 2 minutes)")
    parser.add_argument("--backends", type=_names, default=_names(DEFAULT_BACKENDS),
                        help=f"comma-separated, from {','.join(BACKENDS)} "
                        f"(default {DEFAULT_BACKENDS})")  # fmt: skip
    parser.add_argument("--lengths", type=_ints, default=(10, 1000, 10000),
                        help="history lengths, in messages (default 10,1000,10000)")  # fmt: skip
    parser.add_argument("--threads", type=int, default=32,
                        help="concurrent sessions of the throughput run (default 32)")  # fmt: skip
    parser.add_argument("--no-peers", action="store_true", help="only chatkeep and raw rows")
    parser.add_argument("--seed", type=int, default=1, help="seed of the turn order shuffles")
    parser.add_argument("--json", type=Path, help="also write the results to this file")
    parser.add_argument("--markdown", type=Path, help="also write Markdown tables to this file")
    return parser.parse_args(argv)


def _version(distribution: str) -> str:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def _quiet() -> None:
    # Peers warn about deprecations and experimental features on every call; the numbers
    # are the output here.
    warnings.filterwarnings("ignore")
    logging.basicConfig(level=logging.ERROR)
    for name in ("werkzeug", "azure", "botocore", "httpx", "agent_framework"):
        logging.getLogger(name).setLevel(logging.ERROR)


def _open(runner: Runner, variant: AnyVariant) -> None:
    def action() -> None:
        runner.call(variant.open())

    runner.guard(variant, "open", action)


def _close(runner: Runner, variant: AnyVariant) -> None:
    try:
        runner.call(variant.close())
    except Exception as exc:  # a close failing must not stop the others
        print(f"  ! {variant.name} failed to close: {type(exc).__name__}: {exc}", flush=True)


def measure_backend(name: str, context: Context, runner: Runner) -> BackendResult:
    """Set up one backend, measure every variant, clean up."""
    settings = runner.settings
    started = time.perf_counter()
    print(f"\n[{name}] setting up", flush=True)
    try:
        run = setup(name, context)
    except ServiceMissing as missing:
        print(f"[{name}] skipped: {missing}", flush=True)
        return BackendResult(name, "", settings.lengths, settings.threads, 0, [], str(missing))
    rows = [Row.of(variant) for variant in run.variants]
    live: list[AnyVariant] = []
    try:
        for variant in run.variants:
            if isinstance(variant, Unavailable):
                continue
            _open(runner, variant)
            if variant.name not in runner.failures:
                live.append(variant)
        # Objects alive now (modules the peers imported, mostly) leave the collector's
        # generations, so that a full collection during a turn is short, whichever
        # variant it lands on.
        gc.collect()
        gc.freeze()
        for length in settings.lengths:
            print(f"[{name}] history {length:,}: {len(live)} variants "
                  f"({time.perf_counter() - started:.0f} s)", flush=True)  # fmt: skip
            samples, last_sessions = runner.latency(live, length)
            for row in rows:
                if row.name in samples:
                    row.latency[length] = samples[row.name]
            order = list(live)
            runner.random.shuffle(order)
            for variant in order:
                peak = runner.peak_memory(variant, last_sessions.get(variant.name, ""))
                next(r for r in rows if r.name == variant.name).memory[length] = peak
        print(f"[{name}] throughput: {settings.threads} sessions x "
              f"{settings.throughput_seconds:g} s ({time.perf_counter() - started:.0f} s)",
              flush=True)  # fmt: skip
        indexed = list(enumerate(live))
        runner.random.shuffle(indexed)
        for index, variant in indexed:
            rate = runner.throughput(variant, index)
            next(r for r in rows if r.name == variant.name).throughput = rate
            # Closed at once: pools of 10 connections each would add up past a server's
            # connection limit.
            live.remove(variant)
            _close(runner, variant)
    finally:
        for variant in live:
            _close(runner, variant)
        run.cleanup()
    for row in rows:
        failure = runner.failures.get(row.name)
        if failure is not None:
            row.failure = f"{failure.where}: {failure.error}"
    runner.failures.clear()
    print(f"[{name}] done in {time.perf_counter() - started:.0f} s", flush=True)
    return BackendResult(
        name, run.where, settings.lengths, settings.threads, settings.throughput_length, rows
    )


def header(settings: Settings) -> str:
    """What ran where, so a table can be read without the command line."""
    versions = ", ".join(f"{d} {_version(d)}" for d in VERSIONS)
    mode = "quick" if settings.quick else "full"
    return (
        f"chatkeep benchmarks, {mode} run, {dt.datetime.now().isoformat(timespec='minutes')}\n"
        f"machine: {platform.machine()} {os.cpu_count()} cores, {platform.system()} "
        f"{platform.release()}, Python {platform.python_version()}\n"
        f"versions: {versions}\n"
        f"per variant and length: up to {settings.turns} turns after {settings.warmup} "
        f"warm-up, at least {settings.min_turns}, ~{settings.variant_seconds:g} s cap; "
        "turns of all variants interleaved in shuffled rounds"
    )


def main(argv: list[str] | None = None) -> int:
    """Run the benchmarks; 0 unless nothing could be measured."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] in (["llama-index"], ["strands"]):  # chatkeep_bench/edit_frameworks.py
        from chatkeep_bench.edit_frameworks import main as frameworks_main

        return frameworks_main(argv[1:], argv[0])
    if argv[:1] == ["default-path"]:  # issue 29's rows: chatkeep_bench/default_path.py
        from chatkeep_bench.default_path import main as default_path_main

        return default_path_main(argv[1:])
    if argv[:1] == ["langgraph"]:  # LangGraph checkpointers: chatkeep_bench/langgraph.py
        from chatkeep_bench.langgraph import main as langgraph_main

        return langgraph_main(argv[1:])
    if argv[:1] == ["google-adk"]:  # ADK session services: chatkeep_bench/google_adk.py
        from chatkeep_bench.google_adk import main as google_adk_main

        return google_adk_main(argv[1:])
    if argv[:1] == ["pydantic-ai"]:  # Pydantic AI stores: chatkeep_bench/pydantic_ai_store.py
        from chatkeep_bench.pydantic_ai_store import main as pydantic_ai_main

        return pydantic_ai_main(argv[1:])
    args = parse(argv)
    _quiet()
    # A SIGTERM (a CI timeout, a killed nox) still runs the cleanups in ``finally``.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    settings = Settings.preset(
        quick=args.quick, lengths=args.lengths, threads=args.threads, seed=args.seed
    )
    token = secrets.token_hex(4)
    workdir = Path(tempfile.mkdtemp(prefix=f"ckbench-{token}-"))
    context = Context(token=token, workdir=workdir, peers=not args.no_peers)
    runner = Runner(settings, token)
    heading = header(settings)
    print(heading, flush=True)
    started = time.perf_counter()
    results: list[BackendResult] = []
    try:
        for name in args.backends:
            result = measure_backend(name, context, runner)
            results.append(result)
            print(format_backend(result), flush=True)
    finally:
        runner.close()
        shutil.rmtree(workdir, ignore_errors=True)
    print(format_summary(results))
    print(format_targets(results))
    print(f"total {time.perf_counter() - started:.0f} s")
    if args.json:
        document = {
            "header": heading,
            "settings": settings.__dict__,
            "results": [result.as_json() for result in results],
        }
        args.json.write_text(json.dumps(document, indent=2, default=str) + "\n")
    if args.markdown:
        title = "```\n" + heading + "\n```"
        args.markdown.write_text(format_markdown(results, title) + "\n")
    measured = any(not result.skipped for result in results)
    return 0 if measured else 1


if __name__ == "__main__":
    sys.exit(main())
