"""The cold-process cost of the CLI on SQLite (issue 15): `chatkeep sessions list` and
`chatkeep --help` in fresh processes, against `python -c pass` as the floor, interleaved.

    python benchmarks/startup.py [--runs 15]      # or: nox -s startup

Prints the fastest and the median wall time of each (the fastest is the honest figure on a
loaded machine: load only adds time), what each adds over the interpreter alone, and the
slowest imports of `sessions list` from `python -X importtime`.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

#: One stored message (the listing reads each session's metadata from its messages).
MESSAGE = b'{"type":"message","role":"user","contents":[{"type":"text","text":"Hi"}]}'


def _cli() -> list[str]:
    found = shutil.which("chatkeep", path=str(Path(sys.executable).parent))
    return [found] if found else [sys.executable, "-m", "chatkeep.cli"]


def _time(command: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(command, env=env, check=True, capture_output=True)
    return time.perf_counter() - start


def _importtime(command: list[str], env: dict[str, str], top: int) -> list[tuple[int, str]]:
    done = subprocess.run(
        [sys.executable, "-X", "importtime", *command],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    rows = []
    for line in done.stderr.splitlines():
        if not line.startswith("import time:") or "cumulative" in line:
            continue
        _, cumulative, name = line[len("import time:") :].split("|")
        depth = len(name) - len(name.lstrip(" "))
        rows.append((depth, int(cumulative), name.strip()))
    shallowest = min(depth for depth, _, _ in rows)
    top_level = [(micros, name) for depth, micros, name in rows if depth == shallowest]
    return sorted(top_level, reverse=True)[:top]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--top", type=int, default=8)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        url = f"sqlite:///{Path(folder) / 'startup.db'}"
        env = {**os.environ, "CHATKEEP_URL": url}
        from chatkeep.core import Record, open_store

        with open_store(url) as store:
            for n in range(20):
                store.append(f"session-{n:02d}", [Record("m0", MESSAGE)])
        cli = _cli()
        commands = {
            "python -c pass": [sys.executable, "-c", "pass"],
            "chatkeep --help": [*cli, "--help"],
            "chatkeep sessions list": [*cli, "sessions", "list"],
        }
        times: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(args.runs):  # interleaved: each round runs every command once
            for name, command in commands.items():
                times[name].append(_time(command, env))
        floor = min(times["python -c pass"])
        print(f"{'command':<26} {'fastest':>9} {'median':>9} {'over python':>12}")
        for name, values in times.items():
            best = min(values)
            print(
                f"{name:<26} {best * 1e3:>7.0f}ms {statistics.median(values) * 1e3:>7.0f}ms "
                f"{(best - floor) * 1e3:>10.0f}ms"
            )
        print("\nslowest top-level imports of `chatkeep sessions list` (cumulative):")
        program = (
            "import sys; from chatkeep.cli.main import main; "
            "sys.argv = ['chatkeep', 'sessions', 'list']; main()"
        )
        for micros, name in _importtime(["-c", program], env, args.top):
            print(f"  {micros / 1e3:7.1f} ms  {name}")


if __name__ == "__main__":
    main()
