"""The push gateway is killed -9 in the middle of a batch that fans out to several devices per player (the
reminder's four pushes travel in one message: the whole batch comes back to the restarted gateway).

The gateway records each device outcome as it arrives (delivery/gateway/consumer.py), so after a restart:
- no (push, device) the provider accepted before the crash is sent again;
- the one in flight when the gateway died (the provider never answered it) is sent again;
- nothing is lost: every device of every player gets the push, each push is finished once, the queue is
  empty.

Real `manage.py push_gateway` subprocesses, the real RabbitMQ, pushes made by the real reminder
pipeline, and the FCM peer (OAuth token endpoint included) on loopback.
"""

from __future__ import annotations

import datetime as dt
import os
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.utils import timezone

from delivery.models import Device, PushSend, SendStatus
from reminders.engine.dispatch import occurrences_dispatch_batch
from reminders.models import Occurrence
from tests.factories import training_made
from tests.peers.apns_fcm import FcmPeer, service_account
from tests.trainings_faults.conftest import Processes, ready_count, record_with_the_queue_empty, wait_for
from trainings.models import Push, ReminderRule, Team
from trainings.selectors import job_key

pytestmark = [
    pytest.mark.faults,
    pytest.mark.postgres,
    pytest.mark.rabbitmq,
    pytest.mark.django_db(transaction=True),
]


@pytest.fixture
def fcm(tmp_path: Path) -> Iterator[tuple[FcmPeer, dict[str, str]]]:
    peer = FcmPeer(tmp_path)
    path, public_key = service_account(tmp_path, token_uri=peer.token_uri)
    peer.trust(public_key)
    env = {
        "PUSH_FCM_CREDENTIALS_FILE": str(path),
        "PUSH_FCM_BASE_URL": peer.url,
        "PUSH_TLS_CA_FILE": str(peer.ca_file),
        # One send in flight: the kill lands between two device sends of one batch.
        "TRAININGS_GATEWAY_IN_FLIGHT": "1",
        "TRAININGS_GATEWAY_RETRY_SECONDS": "0",
    }
    yield peer, env
    peer.stop()


def test_a_gateway_killed_mid_batch_resends_nothing_accepted_and_loses_nothing(
    team: Team, push_queue: str, processes: Processes, fcm: tuple[FcmPeer, dict[str, str]]
) -> None:
    peer, env = fcm
    for player in team.players.all():  # three devices each: twelve sends for four pushes
        for n in (2, 3):
            Device.objects.create(
                player=player, provider="fcm", platform="android", token=f"{player.name}-{n}"
            )
    start = timezone.now() + dt.timedelta(days=10)
    training = training_made(team, start, minutes=60, time_zone="UTC")
    first = Occurrence.objects.filter(
        job__key=job_key(training_id=training.pk, rule=ReminderRule.objects.get(slug="invitation"))
    ).earliest("fire_at")
    Occurrence.objects.filter(pk=first.pk).update(next_attempt_at=timezone.now() - dt.timedelta(seconds=1))
    assert occurrences_dispatch_batch().delivered == 1
    wait_for(lambda: ready_count(push_queue) == 1, timeout=5, what="four pushes on the queue, one batch")

    gateway: subprocess.Popen[bytes] | None = None

    def kill_on_the_sixth(token: str) -> bool:
        if len(peer.received) < 5:
            return True
        if gateway is not None and gateway.poll() is None:
            time.sleep(0.5)  # the gateway records outcomes as they come (every 50 ms at most)
            os.kill(gateway.pid, signal.SIGKILL)
            gateway.wait(timeout=10)
        return False  # the sixth send never gets an answer

    peer.on_request = kill_on_the_sixth
    started = time.monotonic()
    gateway = processes.gateway("gateway-1", "--idle-seconds", "30", **env)
    wait_for(lambda: gateway.poll() is not None, timeout=60, what="the kill on the sixth send")
    assert gateway.returncode == -signal.SIGKILL, processes.log("gateway-1")
    accepted_before = sorted(
        PushSend.objects.filter(status=SendStatus.ACCEPTED).values_list("push_key", "device__token")
    )
    assert len(accepted_before) == 5, processes.log("gateway-1")  # everything answered was recorded
    # The peer's thread notes the sixth once the kill returns; this thread may see the gateway dead first.
    wait_for(lambda: len(peer.received) == 6, timeout=5, what="the peer to note the sixth send")
    assert peer.received[-1].status == 0  # the sixth: in flight, never answered
    assert not PushSend.objects.filter(device__isnull=True).exists()  # no push finished as a whole
    wait_for(lambda: ready_count(push_queue) == 1, timeout=10, what="RabbitMQ to requeue the unacked batch")

    peer.on_request = lambda token: True
    sent_before = len(peer.received)
    restarted = processes.gateway("gateway-2", "--idle-seconds", "10", **env)
    try:
        restarted.wait(timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail("the restarted gateway did not finish:\n" + processes.log("gateway-2"))
    elapsed = time.monotonic() - started

    # Pair every request with the push it carried (the data has the push key) and the device token.
    pairs = [(r.body["data"]["push"], r.token) for r in peer.received]
    resent = Counter(pairs[sent_before:])
    assert not resent.keys() & set(accepted_before), "a send the provider had accepted went out again"
    every = {(p.key, d.token) for p in Push.objects.all() for d in Device.objects.filter(player=p.player_id)}
    assert len(every) == 12
    assert set(pairs) == every  # nothing lost
    assert sum(Counter(pairs).values()) == 13  # twelve sends, plus the one in flight at the kill
    assert PushSend.objects.filter(status=SendStatus.ACCEPTED).count() == 12
    record_with_the_queue_empty(
        push_queue,
        [p.key for p in Push.objects.all()],
        scenario="Push gateway killed -9 in the middle of a batch fanning out to 3 devices per player",
        fault="SIGKILL of `manage.py push_gateway` while the FCM peer holds the 6th of 12 device sends",
        result=f"restarted gateway sent only the 7 unrecorded (push, device) pairs: 0 of the 5 accepted "
        f"before the kill re-sent, the one in flight sent again; 12/12 device outcomes accepted, "
        f"4/4 pushes finished, queue empty ({elapsed:.1f} s)",
    )


def test_a_gateway_stopped_mid_batch_finishes_records_and_acks_what_it_sent(
    team: Team, push_queue: str, processes: Processes, fcm: tuple[FcmPeer, dict[str, str]]
) -> None:
    """SIGTERM (a deploy's `systemctl restart`) while a send is in flight: the gateway finishes the batch it
    is sending, records and acks it, and exits by itself; the next gateway has nothing to send again."""
    peer, env = fcm
    for player in team.players.all():  # three devices each: twelve sends for four pushes
        for n in (2, 3):
            Device.objects.create(
                player=player, provider="fcm", platform="android", token=f"{player.name}-{n}"
            )
    training = training_made(team, timezone.now() + dt.timedelta(days=10), minutes=60, time_zone="UTC")
    first = Occurrence.objects.filter(
        job__key=job_key(training_id=training.pk, rule=ReminderRule.objects.get(slug="invitation"))
    ).earliest("fire_at")
    Occurrence.objects.filter(pk=first.pk).update(next_attempt_at=timezone.now() - dt.timedelta(seconds=1))
    assert occurrences_dispatch_batch().delivered == 1
    wait_for(lambda: ready_count(push_queue) == 1, timeout=5, what="four pushes on the queue, one batch")

    gateway: subprocess.Popen[bytes] | None = None

    def stop_on_the_sixth(token: str) -> bool:
        if len(peer.received) == 5 and gateway is not None:
            gateway.send_signal(signal.SIGTERM)
            time.sleep(0.3)  # the stop arrives while this send is still unanswered
        return True

    peer.on_request = stop_on_the_sixth
    gateway = processes.gateway("gateway-1", "--idle-seconds", "60", **env)
    try:
        gateway.wait(timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail("the gateway did not stop on SIGTERM:\n" + processes.log("gateway-1"))
    assert gateway.returncode == 0, processes.log("gateway-1")
    assert len(peer.received) >= 6  # it was stopped with a send in flight
    # The send in flight at the stop was answered, recorded and its message acked with the rest of its batch.
    accepted = PushSend.objects.filter(status=SendStatus.ACCEPTED).count()
    assert accepted == len(peer.received), processes.log("gateway-1")
    restarted = processes.gateway("gateway-2", "--idle-seconds", "2", **env)
    restarted.wait(timeout=60)
    sent = [(r.body["data"]["push"], r.token) for r in peer.received]
    assert len(sent) == len(set(sent)) == 12, "a send went out twice"
    assert PushSend.objects.values("push_key").distinct().count() == 4  # every push has its sends
    wait_for(lambda: ready_count(push_queue) == 0, timeout=5, what="an empty queue")
