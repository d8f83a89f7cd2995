"""`python -m bench.schedule_load`: create `@every 1h` schedules at a steady rate until SIGTERM (the scale
scenario's load, seed 001's 5,000 new schedules a minute).

Its own process, not a thread of the benchmark: the benchmark's AMQP consumer notes when each reminder
arrives, and a busy ORM thread beside it holds the GIL for milliseconds at a time, which showed up as
lateness the scheduler never had. On exit it writes what it did as JSON to `--stats`.
"""

from __future__ import annotations

import argparse
import json
import signal
import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Any


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.schedule_load")
    parser.add_argument("--tag", required=True)
    parser.add_argument("--per-minute", type=int, required=True)
    parser.add_argument("--queue", required=True)
    parser.add_argument("--stats", required=True)
    args = parser.parse_args()

    import django

    django.setup()  # the app's modules import its models, which need the apps loaded first
    from reminders.jobs import Callback
    from reminders.models import CallbackType
    from reminders.schedules.lifecycle import ScheduleSpec, schedule_upsert

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    callback = Callback(type=CallbackType.RABBITMQ, target=args.queue, payload={"kind": "scale"}, secret="")
    stats: dict[str, Any] = {"created": 0, "target_per_minute": args.per_minute, "behind_max": 0.0}
    interval = 60.0 / args.per_minute
    start = time.monotonic()
    while not stop.is_set():
        i = stats["created"]
        lag = time.monotonic() - (start + i * interval)
        if lag < 0:
            stop.wait(-lag)
            continue
        stats["behind_max"] = max(stats["behind_max"], lag)
        schedule_upsert(
            key=f"bench-{args.tag}-{i}",
            spec=ScheduleSpec(expression="@every 1h", timezone="UTC", callback=callback,
                              start_at=datetime.now(UTC) + timedelta(hours=1)),
        )  # fmt: skip
        stats["created"] = i + 1
    stats["seconds"] = time.monotonic() - start
    with open(args.stats, "w", encoding="utf-8") as handle:
        json.dump(stats, handle)


if __name__ == "__main__":
    main()
