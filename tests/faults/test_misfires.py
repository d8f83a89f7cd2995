"""Issue 19, defect 3: misfire policies after downtime, with the worker and beat stopped and restarted.

Four schedules share one outage that spans a whole minute: `@every 10s` and `* * * * *`, each with
`fire_once` and `skip`. The worker is killed and the kicker (beat's stand-in) stopped right after the
`@every` schedules' first on-time event; beat comes back just after the minute boundary that follows the
crontab's stored point, so that point is 60 s stale and the next one has just come due, while the latest
missed `@every` run is 7-8 s old. A consumer then counts each schedule's events on its queue:

- `@every` fire_once: one event for the outage, labelled with the latest missed run (not the stored one);
- `@every` skip: nothing stale; the next future run;
- crontab, either policy: the run that just came due, not the stale stored one.

Real time throughout, so the test waits for a minute boundary (up to a minute) and the outage lasts a
minute: a crontab cannot fire more often. The replacement worker process is started a few seconds
before beat comes back (it does nothing without a kick), so its boot time does not blur the instant the
scan resumes.
"""

from __future__ import annotations

import datetime as dt
import json
import time
from collections.abc import Callable, Iterator

import pytest
from django.utils import timezone

from reminders.models import MisfirePolicy, Occurrence, OccurrenceStatus, Schedule
from tests.factories import schedule_create
from tests.faults import harness

pytestmark = [pytest.mark.faults, pytest.mark.postgres, pytest.mark.rabbitmq]

CASES = {
    "every-once": ("@every 10s", MisfirePolicy.FIRE_ONCE),
    "every-skip": ("@every 10s", MisfirePolicy.SKIP),
    "cron-once": ("* * * * *", MisfirePolicy.FIRE_ONCE),
    "cron-skip": ("* * * * *", MisfirePolicy.SKIP),
}


@pytest.fixture
def queues(fault_queue: str) -> Iterator[dict[str, str]]:
    names = {case: f"{fault_queue}.{case}" for case in CASES}
    yield names
    for name in names.values():
        harness.delete_queue(name)


def _sleep_until(instant: dt.datetime) -> None:
    time.sleep(max(0.0, (instant - timezone.now()).total_seconds()))


def _delivered(key: str) -> list[dt.datetime]:
    return list(
        Occurrence.objects.filter(job__schedule__key=key, status=OccurrenceStatus.DELIVERED)
        .order_by("fire_at")
        .values_list("fire_at", flat=True)
    )


def _unix(instant: dt.datetime) -> int:
    return int(instant.timestamp())


def test_misfire_policies_after_the_worker_and_beat_were_down_for_a_minute(
    workers: Callable[..., harness.WorkerProcess], queues: dict[str, str]
) -> None:
    before = workers("misfire-before")
    before.start()
    now = timezone.now()
    created = now.replace(second=42, microsecond=0)
    if created < now:
        created += dt.timedelta(minutes=1)
    _sleep_until(created)

    with harness.Kicker():
        for case, (expression, policy) in CASES.items():
            schedule_create(key=case, expression=expression, misfire_policy=policy, queue=queues[case])
        anchor = Schedule.objects.get(key="every-once").anchor_at
        assert Schedule.objects.get(key="every-skip").anchor_at == anchor
        stored_cron = Schedule.objects.get(key="cron-once").next_fire_at
        assert stored_cron is not None
        harness.wait_for(
            lambda: all(_delivered(case) for case in ("every-once", "every-skip")),
            timeout=20,
            what="the first on-time @every events",
            worker=before,
        )
    before.kill()  # the outage: no worker, no beat
    stopped = timezone.now()
    assert stopped < stored_cron

    restart = stored_cron + dt.timedelta(minutes=1, seconds=0.3)  # the next crontab run just came due
    _sleep_until(restart - dt.timedelta(seconds=10))
    after = workers("misfire-after")
    after.start()
    _sleep_until(restart)
    period = dt.timedelta(seconds=10)
    latest_every = anchor + period * ((restart - anchor) // period)  # the latest @every run missed
    assert restart - latest_every > dt.timedelta(seconds=5)  # older than the grace: stale for `skip`
    with harness.Kicker():
        harness.wait_for(
            lambda: latest_every + period in _delivered("every-skip") and _delivered("cron-skip")[-1:] != [],
            timeout=25,
            what="the first runs after the outage",
            worker=after,
        )
        harness.wait_for(
            lambda: latest_every + period in _delivered("every-once"), timeout=10, what="every-once resumes"
        )
    after.kill()

    sent = {
        case: [json.loads(m.body)["generated_at"] for m in harness.read_queue(queue, expect=1).messages]
        for case, queue in queues.items()
    }
    first_every = _unix(anchor + period)
    after_cron = _unix(stored_cron + dt.timedelta(minutes=1))
    assert sent == {
        "every-once": [first_every, _unix(latest_every), _unix(latest_every + period)],
        "every-skip": [first_every, _unix(latest_every + period)],
        "cron-once": [after_cron],
        "cron-skip": [after_cron],
    }, f"outage {stopped.time()} to {restart.time()}"
    skipped = dict(
        Occurrence.objects.filter(status=OccurrenceStatus.SKIPPED).values_list(
            "job__schedule__key", "fire_at"
        )
    )
    assert skipped == {
        "every-once": anchor + 2 * period,
        "every-skip": anchor + 2 * period,
        "cron-once": stored_cron,
        "cron-skip": stored_cron,
    }
    harness.record(
        "misfires after downtime",
        f"worker killed and beat stopped for {(restart - stopped).total_seconds():.0f} s across a minute",
        "@every 10s fire_once: 1 event for the outage (latest missed run); skip: none stale, "
        "next future run; "
        "* * * * * either policy: the run that just came due, not the stale stored one",
    )
