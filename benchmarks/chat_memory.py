"""Peak memory of a long `chatkeep chat` session (issue 30): does the offline client (the
default) stay bounded, or does memory grow with every turn it was sent?

    python benchmarks/chat_memory.py [--turns 200,400,800] [--url memory://]

Pipes N lines into `chatkeep chat` (one turn each, on a fresh store) in a fresh process per
N and prints each run's peak resident memory (the child's ``ru_maxrss``), its wall time and
the memory added per turn between consecutive sizes. Bounded means the memory per turn
stays flat while N doubles (what the history itself costs: every turn loads the whole
session, which grows by two messages); unbounded, it doubles with N (before the fix, the
client kept every request: 56/123/573 MB at 200/400/800 turns, 18.4 GB after 5000).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _cli() -> list[str]:
    found = shutil.which("chatkeep", path=str(Path(sys.executable).parent))
    return [found] if found else [sys.executable, "-m", "chatkeep.cli"]


def _peak_of_child(command: list[str], text: str, env: dict[str, str], cwd: str) -> int:
    """Run ``command`` in a fresh process (through a one-child helper, so ``ru_maxrss`` of
    RUSAGE_CHILDREN is this run's alone) and return its peak RSS in KiB."""
    helper = (
        "import resource, subprocess, sys\n"
        "done = subprocess.run(sys.argv[1:], input=sys.stdin.buffer.read(),"
        " stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)\n"
        "sys.stderr.buffer.write(done.stderr[-2000:])\n"
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
        "sys.exit(done.returncode)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", helper, *command],
        input=text.encode(),
        capture_output=True,
        env=env,
        cwd=cwd,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"chatkeep chat failed ({done.returncode}): {done.stderr.decode()}")
    return int(done.stdout.split()[-1])


def main(argv: list[str] | None = None) -> int:
    """Measure and print; exit 0."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", default="200,400,800", help="comma-separated turn counts")
    parser.add_argument("--url", default=None, help="store URL (default: a fresh SQLite file)")
    options = parser.parse_args(argv)
    sizes = [int(n) for n in options.turns.split(",")]
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHATKEEP_")}
    env["CHATKEEP_HISTORY_FILE"] = ""
    print(f"{'turns':>6} {'peak RSS':>10} {'seconds':>8} {'KiB/turn since previous':>24}")
    previous: tuple[int, int] | None = None
    with tempfile.TemporaryDirectory(prefix="chatkeep-chat-memory-") as folder:
        for turns in sizes:
            url = options.url or f"sqlite:///{folder}/chat-{turns}.db"
            text = "".join(f"turn {n}: tell me more\n" for n in range(turns))
            start = time.perf_counter()
            peak = _peak_of_child([*_cli(), "chat", "--no-stream", "--url", url], text, env, folder)
            seconds = time.perf_counter() - start
            slope = ""
            if previous is not None:
                slope = f"{(peak - previous[1]) / (turns - previous[0]):.1f}"
            print(f"{turns:>6} {peak / 1024:>8.1f}MB {seconds:>8.1f} {slope:>24}")
            previous = (turns, peak)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
