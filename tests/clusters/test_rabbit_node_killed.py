"""Cluster scenario: kill -9 of the RabbitMQ node every process is connected to, during a burst.

A private 3-node cluster (tests/clusters/rabbit_cluster.py); every process is given the three nodes in
one URL (`;`, kombu's failover syntax) and REMINDERS_QUEUE_TYPE=quorum, so every queue (Celery's, the
callback queue, the push queue) is a quorum queue whose leader is on node 1, where every process connects
first. Two workers and beat (the real `celery beat`, its kicks) and the push gateway (the real `manage.py
push_gateway`, a webhook provider on loopback counting each (push, device) request) run through a burst
of BURST engine jobs over SPREAD_SECONDS to a quorum queue and the invitations of TRAININGS trainings with
their pushes. A quarter into the burst node 1's Erlang VM gets SIGKILL.

Pass: every job's message is on the quorum queue (read from node 2), every (push, device) reached the
provider, duplicates within the bounds below, and no process was restarted: each reconnected by itself.

Bounds (docs/operations/faults.md): engine messages repeated at most one publish batch per worker
(REMINDERS_BATCH_SIZE x workers; same message id); (push, device) requests repeated at most
TRAININGS_GATEWAY_IN_FLIGHT (the sends in flight when the gateway's connection died; same Idempotency-Key).

Before this service's quorum queues and failover, the same test fails: the classic queues lived on node 1
and went with it, and the gateway's single connection died with the node (the process exited).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from django.utils import timezone
from django_celery_beat.models import IntervalSchedule, PeriodicTask

from bench import processes
from delivery.models import Device, PushSend
from reminders.beat import ensure_periodic_tasks
from reminders.models import Occurrence, OccurrenceStatus
from tests.clusters.rabbit_cluster import RabbitCluster
from tests.factories import MembershipFactory, PlayerFactory, TeamFactory, UserFactory, training_made
from tests.fault_table import record
from tests.faults import harness
from tests.trainings_faults.conftest import database_url
from tests.trainings_faults.test_gateway_crash import Provider
from trainings.models import Push, ReminderRule, Team
from trainings.selectors import job_key

pytestmark = [
    pytest.mark.clusters,
    pytest.mark.faults,
    pytest.mark.postgres,
    pytest.mark.django_db(transaction=True),
]

BURST = 1600
SPREAD_SECONDS = 40.0
TRAININGS = 75  # x 4 players: 300 pushes
WORKERS = 2
BATCH = 100
IN_FLIGHT = 32
PUSH_QUEUE = "trainings.push.cluster"
CALLBACK_QUEUE = "cluster.jobs"


@pytest.fixture
def provider() -> Iterator[Provider]:
    endpoint = Provider()
    yield endpoint
    endpoint.close()


def _cluster_env(cluster: RabbitCluster) -> dict[str, str]:
    return {
        "CELERY_BROKER_URL": cluster.url,
        "REMINDERS_CALLBACK_BROKER_URL": cluster.url,
        "REMINDERS_QUEUE_TYPE": "quorum",
        "TRAININGS_PUSH_QUEUE": PUSH_QUEUE,
        "REMINDERS_BATCH_SIZE": str(BATCH),
        "REMINDERS_RETRY_BASE_SECONDS": "0.2",
        "REMINDERS_RETRY_MAX_SECONDS": "1",
        "REMINDERS_MAX_ATTEMPTS": "50",
    }


def _trainings_due_over_the_burst(start_in: float) -> int:
    """TRAININGS trainings of one team of four, each with its first invitation due within the burst."""
    team: Team = TeamFactory(name="U15", coaches=[UserFactory(username="coach-a")])
    for name in ("Alice", "Bruno", "Chloe", "Dan"):
        MembershipFactory(team=team, player=PlayerFactory(name=name))
    rule = ReminderRule.objects.get(slug="invitation")
    now = timezone.now()
    for i in range(TRAININGS):
        training = training_made(team, now + dt.timedelta(days=10, hours=i), minutes=60, time_zone="UTC")
        first = Occurrence.objects.filter(job__key=job_key(training_id=training.pk, rule=rule)).earliest(
            "fire_at"
        )
        due = now + dt.timedelta(seconds=start_in + SPREAD_SECONDS * i / TRAININGS)
        Occurrence.objects.filter(pk=first.pk).update(next_attempt_at=due)
    return TRAININGS


def _take_all(cluster: RabbitCluster, queue: str) -> processes.Arrivals:
    """Every message on the queue, by basic.get from a surviving node until it stays empty for 2 s."""
    arrivals = processes.Arrivals()
    with contextlib.closing(processes.amqp_connection(cluster.url_of(2))) as conn:
        channel = conn.channel()
        empty_since = time.monotonic()
        while time.monotonic() - empty_since < 2:
            message = channel.basic_get(queue, no_ack=True)
            if message is None:
                time.sleep(0.1)
                continue
            arrivals.received.append((time.time(), message))
            empty_since = time.monotonic()
    return arrivals


def _push_diagnosis(cluster: RabbitCluster, tmp_path: Path) -> str:
    """What a failure needs: the undelivered pushes, their sends, the queues as the cluster sees them."""
    delivered = set(PushSend.objects.values_list("push_key", flat=True))
    missing = [key for key in Push.objects.values_list("key", flat=True) if key not in delivered]
    sends = PushSend.objects.filter(push_key__in=missing).count()
    queues = cluster.ctl(
        cluster.nodes[1], "list_queues", "name", "type", "messages_ready", "messages_unacknowledged"
    )
    gateway_log = (tmp_path / "gateway.log").read_text(errors="replace")[-3000:]
    gateway_log += "\n--- worker ---\n" + (tmp_path / "cluster-0.log").read_text(errors="replace")[-3000:]
    head = f"{len(missing)} pushes undelivered ({sends} sends recorded), e.g. {missing[:3]}"
    return f"{head}\n{queues}\n{gateway_log}"


def test_every_job_and_push_arrives_when_the_node_everyone_is_on_is_killed(
    rabbit_cluster: RabbitCluster,
    workers: Callable[..., harness.WorkerProcess],
    provider: Provider,
    tmp_path: Path,
) -> None:
    cluster = rabbit_cluster
    env = _cluster_env(cluster)
    ensure_periodic_tasks(IntervalSchedule, PeriodicTask)  # beat's scan kick, every second
    started = time.monotonic()
    job = harness.due_occurrences(
        CALLBACK_QUEUE, BURST, key="cluster", in_seconds=8, spread_seconds=SPREAD_SECONDS
    )
    _trainings_due_over_the_burst(start_in=8)
    pushes_before = Push.objects.count()

    side_env = {
        **env,
        "DATABASE_URL": database_url(),
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "REMINDERS_VAR_DIR": str(tmp_path / "var"),
        "PYTHONUNBUFFERED": "1",
    }
    base = {**os.environ, **side_env}
    gateway = processes.start_process(
        [sys.executable, "manage.py", "push_gateway"],
        env={
            **base,
            "TRAININGS_PUSH_PROVIDER": "webhook",
            "TRAININGS_PUSH_WEBHOOK_URL": provider.url,
            "TRAININGS_GATEWAY_IN_FLIGHT": str(IN_FLIGHT),
            "LOG_LEVEL": "INFO",
        },
        log_path=tmp_path / "gateway.log",
    )
    beat = processes.start_process(
        [sys.executable, "-m", "celery", "-A", "config", "beat", "--loglevel=WARNING",
         "--schedule", str(tmp_path / "beat-schedule")],
        env=base,
        log_path=tmp_path / "beat.log",
    )  # fmt: skip
    running = [workers(f"cluster-{i}", **env) for i in range(WORKERS)]
    try:
        harness.start_together(running)
        # Each worker's consumer and publisher, the gateway's and beat's: all on node 1, the first listed.
        harness.wait_for(
            lambda: cluster.connections(1) >= 2 * WORKERS + 2, timeout=60, what="the processes on node 1"
        )

        # A quarter into the burst: node 1 goes, with every connection and the queues' leaders on it.
        harness.wait_for(
            lambda: (
                Occurrence.objects.filter(job=job, status=OccurrenceStatus.DELIVERED).count() >= BURST // 4
            ),
            timeout=60,
            what="a quarter of the burst delivered",
        )
        delivered_at_kill = Occurrence.objects.filter(job=job, status=OccurrenceStatus.DELIVERED).count()
        killed_at = time.monotonic()
        cluster.kill(1)

        harness.wait_for(
            lambda: Occurrence.objects.filter(job=job, status=OccurrenceStatus.DELIVERED).count() == BURST,
            timeout=150,
            what="every engine job delivered after the node loss",
            worker=running[0],
        )
        expected_pushes = pushes_before + 4 * TRAININGS
        try:
            harness.wait_for(
                lambda: (
                    Push.objects.count() >= expected_pushes
                    and PushSend.objects.values("push_key").distinct().count() >= Push.objects.count()
                ),
                timeout=150,
                what="every push delivered",
            )
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{_push_diagnosis(cluster, tmp_path)}") from None
        recovered = time.monotonic() - killed_at

        assert all(w.alive for w in running), "a worker died instead of reconnecting"
        assert all(w.starts == 1 for w in running), "a worker was restarted"
        assert gateway.poll() is None, (
            "the push gateway died:\n" + (tmp_path / "gateway.log").read_text()[-3000:]
        )
        assert beat.poll() is None, "beat died:\n" + (tmp_path / "beat.log").read_text()[-3000:]
    finally:
        for process in (gateway, beat):
            processes.stop_process(process)
        for worker in running:
            worker.stop()

    # Engine: every job's message on the quorum queue, read from a surviving node.
    arrivals = _take_all(cluster, CALLBACK_QUEUE)
    keys = set(Occurrence.objects.filter(job=job).values_list("idempotency_key", flat=True))
    assert len(keys) == BURST
    missing = keys - set(arrivals.by_message_id)
    assert not missing, f"{len(missing)} of {BURST} engine jobs never reached the quorum queue"
    assert set(arrivals.by_message_id) <= keys, "messages that carry no job's key"
    assert arrivals.duplicates <= BATCH * WORKERS, f"{arrivals.duplicates} engine duplicates"
    assert Occurrence.objects.filter(job=job).exclude(status=OccurrenceStatus.DELIVERED).count() == 0

    # Pushes: every (push, device) reached the provider; repeats only the sends in flight.
    expected_pairs = {
        f"{push_key}/{device_id}"
        for push_key, player_id in Push.objects.values_list("key", "player_id")
        for device_id in Device.objects.filter(player_id=player_id).values_list("pk", flat=True)
    }
    seen = Counter(provider.requests)
    assert not expected_pairs - set(seen), f"{len(expected_pairs - set(seen))} (push, device) never sent"
    push_duplicates = sum(n - 1 for n in seen.values())
    assert push_duplicates <= IN_FLIGHT, f"{push_duplicates} repeated (push, device) sends"
    elapsed = time.monotonic() - started
    record(
        "Cluster: RabbitMQ node killed",
        f"kill -9 of the node all {WORKERS} workers, beat and the push gateway were on (3-node cluster, "
        f"quorum queues), {BURST} engine jobs over {SPREAD_SECONDS:.0f} s plus {len(expected_pairs)} "
        f"(push, device), {delivered_at_kill} delivered before the kill",
        f"{BURST}/{BURST} jobs on the quorum queue ({arrivals.duplicates} duplicates, bound "
        f"{BATCH * WORKERS}); {len(expected_pairs)}/{len(expected_pairs)} (push, device) sent "
        f"({push_duplicates} repeated, bound {IN_FLIGHT}); all done {recovered:.0f} s after the kill; "
        f"0 processes restarted ({elapsed:.0f} s)",
    )
