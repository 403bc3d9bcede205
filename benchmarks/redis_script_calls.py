"""What the Redis append script runs per append: the commands it calls, counted by
``INFO commandstats`` on a private ``redis-server`` (a count, not a timing, so it holds on
a loaded machine).

    python benchmarks/redis_script_calls.py [--appends 100]

Per ttl setting (none, 60 s): ten sessions, each appended to twice (unmeasured), then
``--appends`` appends of two records to them; prints the commands per append.
"""

from __future__ import annotations

import argparse
import socket
import subprocess
import time

import redis

from chatkeep.core import Record, open_store


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--appends", type=int, default=100)
    args = parser.parse_args()
    port = _free_port()
    server = subprocess.Popen(
        ["redis-server", "--port", str(port), "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
    )
    try:
        time.sleep(0.5)
        client = redis.Redis(port=port)
        for ttl in ("", "60"):
            query = f"?key_prefix=calls{ttl}:" + (f"&ttl={ttl}" if ttl else "")
            store = open_store(f"redis://127.0.0.1:{port}/0{query}")
            for number in range(20):
                store.append(f"s{number % 10}", [Record(f"w{number}", b"{}")])
            client.config_resetstat()
            for number in range(args.appends):
                batch = [Record(f"u{number}", b"{}"), Record(f"a{number}", b"{}")]
                store.append(f"s{number % 10}", batch)
            stats = client.info("commandstats")
            calls = {
                name.removeprefix("cmdstat_"): entry["calls"] / args.appends
                for name, entry in stats.items()
                if name not in ("cmdstat_evalsha", "cmdstat_info", "cmdstat_config|resetstat")
            }
            listed = ", ".join(f"{name} {count:g}" for name, count in sorted(calls.items()))
            print(f"ttl={ttl or 'none'}: {sum(calls.values()):g} commands per append ({listed})")
            store.close()
        client.close()
    finally:
        server.terminate()
        server.wait()


if __name__ == "__main__":
    main()
