"""Seed a scenario's burst into a database of its own: `python -m tests.faults.cluster_seed KIND ...` with
DATABASE_URL set to it (the scenario clusters are not pytest-django's test database, so the seeding runs
in a process of its own on their URL, through the same models and services as the app).

- `engine QUEUE COUNT IN SPREAD [PRIORITY]`: COUNT jobs to the AMQP queue QUEUE, one occurrence each, due
  from IN seconds on, spread over SPREAD seconds.
- `http URL COUNT IN SPREAD`: the same, with an HTTP callback to URL (a retry storm's failing endpoint).
- `trainings COUNT IN SPREAD`: a team of four players with one FCM device each (the factory's), and COUNT
  trainings ten days ahead whose earliest reminder is made due from IN seconds on, spread over SPREAD
  seconds (the rest stay ten days away); each fires four pushes, one per player.
"""

from __future__ import annotations

import datetime as dt
import os
import sys


def engine(
    queue: str, count: int, in_seconds: float, spread: float, priority: int = 5, callback_type: str = ""
) -> None:
    from django.utils import timezone

    from reminders.models import CallbackType, Job, Occurrence

    jobs = Job.objects.bulk_create(
        [
            Job(
                key=f"burst-{queue}-{priority}-{n}",
                callback_type=callback_type or CallbackType.RABBITMQ,
                target=queue,
                payload={"n": n},
                priority=priority,
            )
            for n in range(count)
        ],
        batch_size=1000,
    )
    base = timezone.now() + dt.timedelta(seconds=in_seconds)
    Occurrence.objects.bulk_create(
        [
            Occurrence(
                job=job,
                fire_at=(at := base + dt.timedelta(seconds=spread * n / count)),
                next_attempt_at=at,
                priority=priority,
            )
            for n, job in enumerate(jobs)
        ],
        batch_size=1000,
    )


def trainings(count: int, in_seconds: float, spread: float) -> None:
    from django.utils import timezone

    from delivery.models import Device
    from reminders.models import Occurrence
    from tests.factories import MembershipFactory, PlayerFactory, TeamFactory, training_made

    team = TeamFactory(name="Burst")
    for name in ("Alice", "Bruno", "Chloe", "Dan"):  # the factory gives each an FCM device
        MembershipFactory(team=team, player=PlayerFactory(name=name))
    assert Device.objects.filter(provider="fcm").count() == 4
    start = timezone.now() + dt.timedelta(days=10)
    base = timezone.now() + dt.timedelta(seconds=in_seconds)
    for n in range(count):
        training = training_made(team, start + dt.timedelta(hours=n), minutes=60, time_zone="UTC")
        first = Occurrence.objects.filter(job__payload__training=str(training.pk)).order_by("fire_at").first()
        assert first is not None, "a training made no reminder"
        at = base + dt.timedelta(seconds=spread * n / count)
        Occurrence.objects.filter(pk=first.pk).update(next_attempt_at=at)


def main(argv: list[str]) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()
    kind, *args = argv
    if kind == "engine":
        priority = int(args[4]) if len(args) > 4 else 5
        engine(args[0], int(args[1]), float(args[2]), float(args[3]), priority)
    elif kind == "http":
        engine(args[0], int(args[1]), float(args[2]), float(args[3]), callback_type="http")
    elif kind == "trainings":
        trainings(int(args[0]), float(args[1]), float(args[2]))
    else:
        raise SystemExit(f"unknown kind {kind!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
