"""Two first requests for the same new job key at once: one creates it, the other updates it; no 500."""

from __future__ import annotations

import datetime as dt
import threading
import time
from typing import Any

import pytest
from django.db import connection, transaction
from django.utils import timezone

from reminders.jobs import Callback, OwnershipError, job_upsert
from reminders.models import CallbackType, Job, Occurrence, OccurrenceStatus
from tests.factories import UserFactory


def _callback(queue: str) -> Callback:
    return Callback(type=CallbackType.RABBITMQ, target=queue, payload={"queue": queue})


pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def _race(first_owner: Any, second_owner: Any) -> tuple[list[Any], list[BaseException], dt.datetime]:
    """The first request creates the key and holds its transaction open until the second one (by
    `second_owner`, for an instant two hours later) is waiting on the unique key; then it commits. Returns
    what the second returned (or raised), and its instant."""
    first_inserted, release = threading.Event(), threading.Event()
    results: list[Any] = []
    errors: list[BaseException] = []
    soon = timezone.now() + dt.timedelta(hours=1)
    later = timezone.now() + dt.timedelta(hours=2)

    def second() -> Any:
        return job_upsert(key="race", schedules=[later], callback=_callback("second"), owner=second_owner)

    def first() -> None:
        try:
            with transaction.atomic():
                job_upsert(key="race", schedules=[soon], callback=_callback("first"), owner=first_owner)
                first_inserted.set()
                release.wait(timeout=10)
        finally:
            connection.close()

    def run_second() -> None:
        try:
            first_inserted.wait(timeout=10)
            results.append(second())
        except BaseException as exc:  # reported to the test thread
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=first), threading.Thread(target=run_second)]
    for thread in threads:
        thread.start()
    # Let the second INSERT reach the unique index and wait there for the first transaction.
    deadline = time.monotonic() + 10
    while not _waiting_on_a_lock() and time.monotonic() < deadline:
        time.sleep(0.05)
    release.set()
    for thread in threads:
        thread.join(timeout=30)
    return results, errors, later


def _waiting_on_a_lock() -> bool:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity"
            " WHERE wait_event_type = 'Lock' AND datname = current_database()"
        )
        return bool(cursor.fetchone()[0])


@pytest.fixture
def two_owners() -> list[Any]:
    return [UserFactory(), UserFactory()]


def test_the_second_first_request_for_a_key_updates_the_job_the_first_one_created(two_owners) -> None:
    results, errors, later = _race(two_owners[0], two_owners[0])

    assert errors == []
    ((job, created),) = results
    assert created is False
    job = Job.objects.get(key="race")
    assert (job.target, job.version) == ("second", 2)
    # The second request's instants replaced the first one's.
    pending = Occurrence.objects.filter(job=job, status=OccurrenceStatus.SCHEDULED)
    assert list(pending.values_list("fire_at", flat=True)) == [later]


def test_a_concurrent_first_request_by_another_owner_is_refused_not_a_server_error(two_owners) -> None:
    results, errors, _ = _race(two_owners[0], two_owners[1])

    assert results == []
    assert len(errors) == 1 and isinstance(errors[0], OwnershipError)
    assert Job.objects.get(key="race").target == "first"
