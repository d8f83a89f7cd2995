"""Scenario 6 (issue 16, item 6): several hosts, one clock. A worker whose wall clock is ahead fires nothing
early and takes over no live lease: due rows, leases, the reaper and throttle buckets go by the database's
clock.

The shifted worker is a real worker process run under Debian's libfaketime (`LD_PRELOAD` with
`FAKETIME=+20s`): its `time.time()` and `datetime.now()` are 20 s ahead, as on a host whose NTP is off.
Its monotonic clock is left alone (`FAKETIME_DONT_FAKE_MONOTONIC=1`: with a faked one, libfaketime 0.9.10
turns Python's timed lock waits into endless ones), and the worker sleeps with select() instead of
`time.sleep`, which that libfaketime fails with EINVAL (`FAULT_SLEEP_BY_SELECT`, see fault_worker.py).
PostgreSQL, RabbitMQ, this test and the consumer keep the machine's real clock. The kicks expire later
than beat's (5 s): Celery stamps the expiry with the sender's clock, so a worker 20 s ahead would discard
every such kick and never scan at all.

Without libfaketime the scenario skips with a message on a developer's machine and fails in CI (CI=true),
where .ci/run installs it.
"""

from __future__ import annotations

import datetime as dt
import glob
import os
import subprocess
import sys
import time
from collections.abc import Callable

import pytest
from django.conf import settings
from django.db import connection

from bench.processes import Arrivals, Consumer
from reminders.engine.claiming import occurrences_claim_due
from reminders.models import CallbackType, Job, Occurrence, OccurrenceStatus, ThrottlePolicy
from tests.faults import harness

pytestmark = [pytest.mark.faults, pytest.mark.postgres, pytest.mark.rabbitmq]

SHIFT_SECONDS = 20
KICK_EXPIRES = SHIFT_SECONDS + 10
LIBFAKETIME_GLOB = "/usr/lib/*/faketime/libfaketime.so.1"


def _libfaketime() -> str:
    found = sorted(glob.glob(LIBFAKETIME_GLOB))
    if not found:
        reason = f"needs libfaketime ({LIBFAKETIME_GLOB}): apt-get install faketime"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"{reason} (CI must run this scenario; .ci/run installs it)")
        pytest.skip(reason)
    return found[0]


@pytest.fixture
def shifted_env() -> dict[str, str]:
    """The environment of a process whose wall clock runs SHIFT_SECONDS ahead; checked before use, so the
    scenario cannot pass because the shift silently did nothing."""
    env = {
        "LD_PRELOAD": _libfaketime(),
        "FAKETIME": f"+{SHIFT_SECONDS}s",
        "FAKETIME_DONT_FAKE_MONOTONIC": "1",
        "FAULT_SLEEP_BY_SELECT": "1",
    }
    probe = "import datetime, time; print(time.time(), datetime.datetime.now(datetime.UTC).timestamp())"
    before = time.time()
    out = subprocess.run(
        [sys.executable, "-c", probe], env={**os.environ, **env}, capture_output=True, text=True, check=True
    )
    after = time.time()
    for seen in map(float, out.stdout.split()):
        assert before + SHIFT_SECONDS - 1 <= seen <= after + SHIFT_SECONDS + 1, (out.stdout, before)
    return env


def _db_now() -> dt.datetime:
    with connection.cursor() as cursor:
        cursor.execute("SELECT clock_timestamp()")
        return cursor.fetchone()[0]


def _arrived_once(arrivals: Arrivals, total: int) -> None:
    counts = arrivals.by_message_id
    assert len(counts) == total, f"{len(counts)} of {total} occurrences arrived"
    twice = {key: n for key, n in counts.items() if n > 1}
    assert not twice, f"{len(twice)} occurrences arrived more than once: {list(twice.items())[:3]}"


def _early(arrivals: Arrivals) -> list[float]:
    """Seconds by which messages arrived before their fire time (by this process's, the real, clock)."""
    return sorted(-late for late in arrivals.lateness() if late < 0)


def test_it_fires_nothing_early_with_a_worker_clock_ahead(
    workers: Callable[..., harness.WorkerProcess], fault_queue: str, shifted_env: dict[str, str]
) -> None:
    total = 60
    # Leases of 15 s: a worker judging them by its own clock (20 s ahead) would see each one expired as
    # soon as it was taken, as with the fault suite's usual 5 s, while a worker the loaded machine stalls
    # between claim and mark for 5-15 s keeps its lease (a lost one is redelivered, and would not be the
    # clock's doing).
    lease = {"REMINDERS_LEASE_SECONDS": str(SHIFT_SECONDS - 5)}
    honest = workers("honest", **lease)
    ahead = workers("ahead", **shifted_env, **lease)
    harness.start_together([honest, ahead])
    # Half plain, half under a throttle policy (its own claim and token bucket), loose enough not to
    # delay anything: both claims must judge "due" by the database.
    policy = ThrottlePolicy.objects.create(name="shifted-clock", max_per_second=1000, burst=1000)
    plain = Job.objects.create(key="clock-plain", callback_type=CallbackType.RABBITMQ, target=fault_queue)
    throttled = Job.objects.create(
        key="clock-throttled", callback_type=CallbackType.RABBITMQ, target=fault_queue, throttle=policy
    )
    with Consumer(settings.CELERY_BROKER_URL, fault_queue) as consumer, harness.Kicker(expires=KICK_EXPIRES):
        # Spread over 6 s from 4 s ahead: both workers get kicks while rows come due one after another.
        first = _db_now() + dt.timedelta(seconds=4)
        Occurrence.objects.bulk_create(
            [
                Occurrence(
                    job=job,
                    fire_at=(at := first + dt.timedelta(milliseconds=100 * i)),
                    next_attempt_at=at,
                    priority=job.priority,
                    throttle=job.throttle,
                )
                for i in range(total)
                for job in [plain if i % 2 else throttled]
            ]
        )
        harness.wait_for(
            lambda: harness.all_delivered(total), timeout=60, what="every occurrence delivered", worker=ahead
        )
        consumer.wait_quiet(total, timeout=10)

    arrivals = consumer.arrivals
    _arrived_once(arrivals, total)
    early = _early(arrivals)
    assert not early, f"{len(early)} of {total} fired early, by up to {early[-1]:.2f} s"
    assert set(Occurrence.objects.values_list("status", "attempts")) == {(OccurrenceStatus.DELIVERED, 1)}
    delivered_by_ahead = sum(n for phase, n in ahead.phases() if phase == "marked")
    assert delivered_by_ahead > 0, "the shifted worker delivered nothing: the scenario did not test it"
    harness.record(
        "6. clock ahead",
        f"one worker's wall clock {SHIFT_SECONDS} s ahead (libfaketime), one correct; {total} occurrences "
        "due 4-10 s later, half throttled",
        f"{total}/{total} arrived once, none before its fire time (latest {max(arrivals.lateness()):.2f} s "
        f"late); the shifted worker delivered {delivered_by_ahead}",
    )


def test_it_leaves_a_live_lease_alone_with_a_worker_clock_ahead(
    workers: Callable[..., harness.WorkerProcess], fault_queue: str, shifted_env: dict[str, str]
) -> None:
    total, lease_seconds = 20, 6
    ahead = workers("ahead", **shifted_env)
    ahead.start()
    harness.due_occurrences(fault_queue, total)
    # This test holds the lease, as a busy worker on a correct host would (its lease ends by the database's
    # clock); the shifted worker's reaper runs on every kick meanwhile.
    claim = occurrences_claim_due(now=_db_now(), limit=total, lease_seconds=lease_seconds)
    assert len(claim.occurrences) == total
    lease_end = claim.claimed_until
    with Consumer(settings.CELERY_BROKER_URL, fault_queue) as consumer, harness.Kicker(expires=KICK_EXPIRES):
        while _db_now() < lease_end - dt.timedelta(seconds=0.5):
            held = Occurrence.objects.filter(status=OccurrenceStatus.CLAIMED, lease_token=claim.token).count()
            assert held == total, f"the shifted worker took over {total - held} rows of a live lease"
            time.sleep(0.2)
        harness.wait_for(
            lambda: harness.all_delivered(total),
            timeout=30,
            what="the expired lease taken over",
            worker=ahead,
        )
        consumer.wait_quiet(total, timeout=10)

    arrivals = consumer.arrivals
    _arrived_once(arrivals, total)
    first_arrival = min(at for at, _ in arrivals.received)
    assert first_arrival >= lease_end.timestamp(), (
        f"delivered {lease_end.timestamp() - first_arrival:.2f} s before the lease it took over ended"
    )
    assert set(Occurrence.objects.values_list("attempts", flat=True)) == {2}
    harness.record(
        "6. clock ahead, live lease",
        f"a worker {SHIFT_SECONDS} s ahead (libfaketime) beside a live {lease_seconds} s lease on "
        f"{total} rows",
        f"lease kept until its end by the database's clock; then {total}/{total} taken over and delivered "
        f"once, first {first_arrival - lease_end.timestamp():.2f} s after the lease ended",
    )
