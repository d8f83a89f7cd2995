"""Issue 19, defect 3: misfire policies after downtime, with the worker and beat stopped and restarted.

Four schedules share one outage that spans a whole minute: `@every 30s` and `* * * * *`, each with
`fire_once` and `skip`. The worker is killed and the kicker (beat's stand-in) stopped right after the
`@every` schedules' first on-time event; beat comes back just after the minute boundary that follows the
crontab's stored point, so that point is 60 s stale and the next one has just come due, while the latest
missed `@every` run is 25-30 s old. A consumer then counts each schedule's events on its queue:

- `@every` fire_once: one event for the outage, labelled with the latest missed run (not the stored one);
- `@every` skip: nothing stale; the next future run;
- crontab, either policy: the run that just came due, not the stale stored one.

Real worker processes throughout, on the database's clock as the engine reads it, moved by the test
(harness.DatabaseClock) only while no scan runs: the schedules are made at second 5 of a minute, the clock
is moved to 3 s before their first `@every` run, which the worker then fires on time, and the outage's
minute passes in an instant while both processes are down, so the scenario waits for no minute boundary.
A slow machine has 23 s from that first run to the kill before the next runs are claimed (the look-ahead
takes them 2 s early). The replacement worker is started and ready before the clock is moved and beat
comes back, so its boot time does not blur the instant the scan resumes; from that instant the scan may
take up to 4.8 s before the outcome would be another (the crontab's run older than the 5 s grace).
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Iterator

import pytest
from django.utils import timezone

from reminders.models import MisfirePolicy, Occurrence, OccurrenceStatus, Schedule
from tests.factories import schedule_create
from tests.faults import harness

pytestmark = [pytest.mark.faults, pytest.mark.postgres, pytest.mark.rabbitmq]

CASES = {
    "every-once": ("@every 30s", MisfirePolicy.FIRE_ONCE),
    "every-skip": ("@every 30s", MisfirePolicy.SKIP),
    "cron-once": ("* * * * *", MisfirePolicy.FIRE_ONCE),
    "cron-skip": ("* * * * *", MisfirePolicy.SKIP),
}


@pytest.fixture
def queues(fault_queue: str) -> Iterator[dict[str, str]]:
    names = {case: f"{fault_queue}.{case}" for case in CASES}
    yield names
    for name in names.values():
        harness.delete_queue(name)


@pytest.fixture
def clock(transactional_db: None) -> Iterator[harness.DatabaseClock]:
    made = harness.DatabaseClock()
    yield made
    made.drop()


def _delivered(key: str) -> list[dt.datetime]:
    return list(
        Occurrence.objects.filter(job__schedule__key=key, status=OccurrenceStatus.DELIVERED)
        .order_by("fire_at")
        .values_list("fire_at", flat=True)
    )


def _unix(instant: dt.datetime) -> int:
    return int(instant.timestamp())


def test_misfire_policies_after_the_worker_and_beat_were_down_for_a_minute(
    workers: Callable[..., harness.WorkerProcess], queues: dict[str, str], clock: harness.DatabaseClock
) -> None:
    before = workers("misfire-before", **clock.worker_env("misfire-before"))
    before.start()
    minute = timezone.now().replace(second=0, microsecond=0)
    created = minute + dt.timedelta(seconds=5)
    period = dt.timedelta(seconds=30)
    lookahead = dt.timedelta(seconds=2)  # REMINDERS_LOOKAHEAD_SECONDS: rows are claimed this early
    clock.set(created)
    for case, (expression, policy) in CASES.items():
        schedule_create(
            key=case, expression=expression, misfire_policy=policy, queue=queues[case], now=created
        )
    anchor = Schedule.objects.get(key="every-once").anchor_at
    assert anchor == created
    assert Schedule.objects.get(key="every-skip").anchor_at == anchor
    stored_cron = Schedule.objects.get(key="cron-once").next_fire_at
    assert stored_cron == minute + dt.timedelta(minutes=1)
    clock.set(anchor + period - dt.timedelta(seconds=3))  # no scan ran since the schedules were made

    with harness.Kicker():
        harness.wait_for(
            lambda: all(_delivered(case) for case in ("every-once", "every-skip")),
            timeout=20,
            what="the first on-time @every events",
            worker=before,
        )
    before.kill()  # the outage: no worker, no beat
    stopped = clock.now()
    # The second @every run and the crontab's stored point were not claimed yet: the outage, not the worker
    # before it, is what they meet.
    assert stopped < anchor + 2 * period - lookahead, f"killed at {stopped.time()}: too late"
    assert stopped < stored_cron - lookahead, f"killed at {stopped.time()}: too late"

    after = workers("misfire-after", **clock.worker_env("misfire-after"))
    after.start()
    restart = stored_cron + dt.timedelta(minutes=1, seconds=0.2)  # the next crontab run just came due
    latest_every = anchor + period * ((restart - anchor) // period)  # the latest @every run missed
    assert restart - latest_every > dt.timedelta(seconds=5)  # older than the grace: stale for `skip`
    assert latest_every > anchor + 2 * period  # not the stored one
    clock.set(restart)
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
        f"worker killed and beat stopped for {(restart - stopped).total_seconds():.0f} s across a minute "
        "(of the database's clock, moved forward)",
        "@every 10s fire_once: 1 event for the outage (latest missed run); skip: none stale, "
        "next future run; "
        "* * * * * either policy: the run that just came due, not the stale stored one",
    )
