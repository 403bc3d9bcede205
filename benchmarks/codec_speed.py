"""How fast the message codec encodes and decodes (``chatkeep.core.codec``).

    python benchmarks/codec_speed.py [--messages 1000] [--repeat 15] [--json out.json]

A fixed, seeded corpus of realistic messages (user and assistant text, tool calls with
JSON arguments, tool results with nested JSON, reasoning, an occasional small image, and
MAF's per-content ``additional_properties: {}`` / ``hosted: false`` as MAF writes them) is
encoded with :func:`encode_message` and decoded with :func:`decode_message`, ``--repeat``
times; the best and the median pass are reported in microseconds per message, next to
the stdlib floor (``json.dumps`` / ``json.loads`` of the same dicts, no message objects).
Nothing here is a pass/fail check: it prints numbers to compare before and after a change.
"""

from __future__ import annotations

import argparse
import base64
import gc
import json
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from chatkeep_bench.workload import text

from chatkeep.core import decode_message, encode_message, message_from_dict


def _content(rng: random.Random, number: int, role: str) -> list[dict[str, Any]]:
    """The MAF-shaped contents of message ``number`` (as MAF's ``to_dict()`` writes them)."""
    if role == "user":
        contents = [{"type": "text", "text": text(number), "additional_properties": {}}]
        if rng.random() < 0.03:
            png = bytes(rng.randrange(256) for _ in range(600))
            contents.append(
                {
                    "type": "data",
                    "uri": "data:image/png;base64," + base64.b64encode(png).decode(),
                    "media_type": "image/png",
                    "additional_properties": {},
                }
            )
        return contents
    if role == "tool":
        result = {
            "city": "Oslo",
            "days": [
                {"day": d, "high": 3.5 + d, "low": -1.25 * d, "wind": [4, 7]} for d in range(3)
            ],
            "source": "met.no",
        }
        return [
            {
                "type": "function_result",
                "call_id": f"call_{number}",
                "result": result,
                "additional_properties": {},
            }
        ]
    # assistant: text, sometimes reasoning first, sometimes a tool call
    contents = []
    if rng.random() < 0.2:
        contents.append(
            {
                "type": "text_reasoning",
                "text": text(number + 1)[:80],
                "protected_data": base64.b64encode(rng.randbytes(96)).decode(),
                "additional_properties": {},
            }
        )
    contents.append({"type": "text", "text": text(number), "additional_properties": {}})
    if rng.random() < 0.3:
        contents.append(
            {
                "type": "function_call",
                "call_id": f"call_{number}",
                "name": "get_weather",
                "arguments": json.dumps({"city": "Oslo", "days": 3, "units": "metric"}),
                "hosted": False,
                "additional_properties": {},
            }
        )
    return contents


def corpus(count: int, seed: int = 7) -> list[dict[str, Any]]:
    """``count`` MAF-shaped message dicts, the same for a given seed."""
    rng = random.Random(seed)
    roles = ["user", "assistant", "tool", "assistant"]
    messages = []
    for number in range(count):
        role = roles[number % len(roles)]
        properties: dict[str, Any] = {}
        if rng.random() < 0.25:
            properties = {"model": "gpt-x", "usage": {"input": 120 + number, "output": 48}}
        messages.append(
            {
                "type": "message",
                "role": role,
                "contents": _content(rng, number, role),
                "message_id": f"msg_{number:06d}_{rng.getrandbits(48):012x}",
                "additional_properties": properties,
            }
        )
    return messages


def _passes(action: Any, repeat: int) -> list[float]:
    times = []
    for _ in range(repeat):
        gc.collect()
        started = time.perf_counter()
        action()
        times.append(time.perf_counter() - started)
    return times


def main(argv: list[str] | None = None) -> int:
    """Measure and print; always 0."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--json", type=Path, help="also write the numbers to this file")
    args = parser.parse_args(argv)

    dicts = corpus(args.messages)
    messages = [message_from_dict(raw) for raw in dicts]
    encoded = [encode_message(message) for message in messages]
    stdlib = [json.dumps(raw, ensure_ascii=False, separators=(",", ":")) for raw in dicts]
    total_bytes = sum(map(len, encoded))

    rows = {
        "encode_message": lambda: [encode_message(m) for m in messages],
        "decode_message": lambda: [decode_message(b) for b in encoded],
        "json.dumps (floor)": lambda: [
            json.dumps(raw, ensure_ascii=False, separators=(",", ":")) for raw in dicts
        ],
        "json.loads (floor)": lambda: [json.loads(s) for s in stdlib],
    }
    print(
        f"{args.messages} messages, {total_bytes / args.messages:.0f} bytes each on average, "
        f"best and median of {args.repeat} passes (Python {sys.version.split()[0]})"
    )
    results: dict[str, dict[str, float]] = {}
    for name, action in rows.items():
        action()  # warm-up
        times = _passes(action, args.repeat)
        best = min(times) / args.messages * 1e6
        median = statistics.median(times) / args.messages * 1e6
        results[name] = {"best_us": best, "median_us": median}
        print(f"  {name:<20} best {best:7.2f} us/message   median {median:7.2f} us/message")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
