"""A real Celery worker (`celery -A config worker --pool solo`) with fault-injection probes.

Started by `tests.faults.harness.WorkerProcess` as `python -m tests.faults.fault_worker NAME`. The probes
change nothing about what the engine does: at each step of a scan they append a line to FAULT_PHASE_FILE
and pause for FAULT_PHASE_DELAY seconds, so the test can kill, freeze or cut this process at a chosen
step instead of at a lucky instant:

- `claimed N`    the claim is committed (rows are leased, nothing published yet);
- `publishing N` messages are on the AMQP channel, the transaction is not committed yet;
- `published N`  the broker accepted the batch, the rows are not marked yet;
- `marked N`     the mark ran and still held N rows (fewer than published: the lease was lost).

The solo pool keeps the whole worker in one process, so `kill -9` of the pid takes the worker down the
way a crash or an OOM kill would, with no pool parent left to recover the task.
"""

from __future__ import annotations

import os
import select
import sys
import time
from typing import Any

PHASES = ("ready", "claimed", "publishing", "published", "marked")


def report_phase(name: str, count: int = 0) -> None:
    """Append `<monotonic time> <phase> <count>` to FAULT_PHASE_FILE (one atomic O_APPEND write)."""
    path = os.environ.get("FAULT_PHASE_FILE")
    if path:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, f"{time.monotonic():.6f} {name} {count}\n".encode())
        finally:
            os.close(fd)


def _pause() -> None:
    delay = float(os.environ.get("FAULT_PHASE_DELAY", "0"))
    if delay:
        time.sleep(delay)


def install_probes() -> None:
    """Wrap the claim, the AMQP commit and the mark with phase reports and pauses."""
    import amqp
    from amqp import spec
    from celery.signals import worker_ready

    from reminders.engine import dispatch, lookahead

    claim_due = dispatch.occurrences_claim_due
    mark_delivered = dispatch.occurrences_mark_delivered
    send_method = amqp.Channel.send_method

    def probed_claim(**kwargs: Any) -> Any:
        claim = claim_due(**kwargs)
        if claim.occurrences:
            report_phase("claimed", len(claim.occurrences))
            _pause()
        return claim

    def probed_send(self: amqp.Channel, sig: Any, *args: Any, **kwargs: Any) -> Any:
        if sig == spec.Tx.Commit:  # every message of the batch is written; the commit is next
            report_phase("publishing")
            _pause()
        return send_method(self, sig, *args, **kwargs)

    def probed_mark(**kwargs: Any) -> int:
        ids = list(kwargs.pop("ids"))
        report_phase("published", len(ids))
        _pause()
        marked = mark_delivered(ids=ids, **kwargs)
        report_phase("marked", marked)
        return marked

    dispatch.occurrences_claim_due = probed_claim
    lookahead.occurrences_claim_due = probed_claim  # the look-ahead scan's claim
    dispatch.occurrences_mark_delivered = probed_mark
    amqp.Channel.send_method = probed_send
    worker_ready.connect(lambda **_: report_phase("ready"), weak=False)


def _sleep_by_select(seconds: float) -> None:
    select.select([], [], [], seconds)


def main(name: str) -> None:
    if os.environ.get("FAULT_SLEEP_BY_SELECT"):
        # Under libfaketime 0.9.10 with a real monotonic clock (tests/faults/test_shifted_clock.py) Python's
        # time.sleep (clock_nanosleep) fails with EINVAL; select() waits correctly.
        time.sleep = _sleep_by_select
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()
    install_probes()
    from config.celery import app

    app.worker_main(
        [
            "worker",
            "--pool=solo",
            "--loglevel=WARNING",
            f"--hostname={name}@%h",
            "--without-mingle",
            "--without-gossip",
            "--without-heartbeat",
        ]
    )


if __name__ == "__main__":
    main(sys.argv[1])
