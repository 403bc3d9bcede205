"""One writer process of the reliability runs (started by the tests, not collected).

It opens the store from the URL, runs ``threads`` threads that each append ``batches``
batches of ``size`` records to one shared session, and writes one JSON line per event to
``out``: every acknowledged batch (``ack``), every exact re-send of an acknowledged batch
(``resend``), and every error an append raised (``error``, with its type and whether it is
one of chatkeep's). A failed append is retried with the same batch, as an application
would, until it is acknowledged or ``attempts`` run out (``gave_up``).

    python writer.py URL SESSION WRITER THREADS BATCHES SIZE RESEND OUT [ATTEMPTS]

With ``CHATKEEP_WRITER_UNTIL=PATH`` set, each thread goes on past ``BATCHES`` until ``PATH``
exists, so a test's faults always land while the writers are running.
"""

from __future__ import annotations

import json
import os
import random
import sys
import threading
import time

from chatkeep.core import ChatkeepError, Record, open_store


def batch_of(writer: int, thread: int, number: int, size: int) -> list[Record]:
    """The records of one batch: ids name where they come from, data is derived from them."""
    return [
        Record(
            f"w{writer}-t{thread}-b{number}-r{index}",
            f"payload of w{writer} t{thread} b{number} r{index} ".encode() * 4,
        )
        for index in range(size)
    ]


def main() -> None:
    url, session, writer, threads, batches, size, resend, out = sys.argv[1:9]
    attempts = int(sys.argv[9]) if len(sys.argv) > 9 else 200
    store = open_store(url)
    lock = threading.Lock()
    journal = open(out, "a", buffering=1)  # noqa: SIM115 (closed at the end of main)

    def log(event: dict[str, object]) -> None:
        with lock:
            journal.write(json.dumps(event) + "\n")

    def append(records: list[Record], kind: str, thread: int, number: int) -> bool:
        for attempt in range(attempts):
            try:
                store.append(session, records)
            except BaseException as error:  # every error is recorded, typed or not
                log(
                    {
                        "event": "error",
                        "thread": thread,
                        "batch": number,
                        "type": type(error).__name__,
                        "typed": isinstance(error, ChatkeepError),
                    }
                )
                time.sleep(min(0.05 * 2 ** min(attempt, 4), 0.5) * random.uniform(0.5, 1))
                continue
            log({"event": kind, "thread": thread, "batch": number, "ids": [r.id for r in records]})
            return True
        log({"event": "gave_up", "thread": thread, "batch": number})
        return False

    def run(thread: int) -> None:
        rng = random.Random(f"{writer}-{thread}")
        until = os.environ.get("CHATKEEP_WRITER_UNTIL")
        number = 0
        while number < int(batches) or (until and not os.path.exists(until)):
            records = batch_of(int(writer), thread, number, int(size))
            if append(records, "ack", thread, number) and rng.random() < float(resend):
                append(records, "resend", thread, number)  # an exact retry: must store nothing
            number += 1

    workers = [threading.Thread(target=run, args=(n,)) for n in range(int(threads))]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    store.close()
    journal.close()


if __name__ == "__main__":
    main()
