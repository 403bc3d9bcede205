"""``python -m chatkeep.fake_model [--port N] [--no-auth]``: serve until interrupted.

Prints ``FAKE_MODEL_URL=http://127.0.0.1:PORT`` first (one line, flushed), so a script or a
test can start it as a subprocess and read where it listens.
"""

from __future__ import annotations

import argparse
import contextlib
import threading

from .server import FakeModelServer


def main(argv: list[str] | None = None) -> None:
    """Run the fake model server in the foreground."""
    parser = argparse.ArgumentParser(prog="python -m chatkeep.fake_model")
    parser.add_argument("--port", type=int, default=0, help="port to listen on (default: any free)")
    parser.add_argument("--no-auth", action="store_true", help="accept requests without a key")
    args = parser.parse_args(argv)
    with FakeModelServer(port=args.port, require_auth=not args.no_auth) as server:
        print(f"FAKE_MODEL_URL={server.url}", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            threading.Event().wait()


if __name__ == "__main__":
    main()
