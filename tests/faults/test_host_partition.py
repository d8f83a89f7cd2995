"""A host cut off for 20 s mid-burst: workers on two "hosts" (network namespaces, tests/faults/netns.py),
each reaching the database and the broker over its own link, and host A's link is set down right after its
worker published a batch and before it marked it.

Host A's worker is neither killed nor told anything: its sockets simply stop answering. Its claimed rows'
leases run out (REMINDERS_LEASE_SECONDS) and host B's worker claims them again and delivers them while A
is still cut off; when the link comes back A's worker carries on by itself, its late mark matches nothing
(the lease is B's now).

Pass: every occurrence on the queue, each under its own message id; the rows A held at the cut delivered by
B before the link came back; duplicates within a batch or two (the one A had published, and what A's socket
still held when it came back); the same two processes throughout.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from django.conf import settings

from bench import processes
from bench.processes import amqp_connection, read_queue, start_process, stop_process
from tests.faults import harness, netns
from tests.faults.pg_pair import DATABASE, PgPair, PgTemplate

pytestmark = [pytest.mark.faults, pytest.mark.clusters, pytest.mark.rabbitmq]

JOBS = 1500
BURST_SECONDS = 40.0
PARTITION_SECONDS = 20.0
BATCH = 50


@pytest.fixture
def hosts() -> Iterator[tuple[netns.Host, netns.Host]]:
    if not netns.available():
        pytest.skip("needs root and iproute2 (ip netns)")
    base = 2 * (os.getpid() % 120) + 1  # test processes side by side get subnets of their own
    a = netns.Host("a", base)
    try:
        b = netns.Host("b", base + 1)
    except BaseException:
        a.remove()
        raise
    yield a, b
    a.remove()
    b.remove()


def broker_url(address: str, port: int) -> str:
    parts = urlsplit(settings.CELERY_BROKER_URL)
    auth = parts.netloc.rsplit("@", 1)[0] + "@" if "@" in parts.netloc else ""
    return f"{parts.scheme}://{auth}{address}:{port}{parts.path}"


def test_a_partitioned_host_loses_its_leases_and_another_host_delivers_everything(
    hosts: tuple[netns.Host, netns.Host], pg_template: PgTemplate, tmp_path: Path
) -> None:
    a, b = hosts
    pair = PgPair(pg_template, listen=[a.gateway, b.gateway], standby=False)
    # The machine's RabbitMQ, reached by each host at its own side of its link (forwarded to loopback).
    proxies = {host.netns: harness.TcpProxy(harness.broker_address(), listen=host.gateway) for host in hosts}
    queue = f"test.hosts.{uuid.uuid4().hex[:10]}"
    workers = []
    try:
        for host in hosts:
            broker = broker_url(host.gateway, proxies[host.netns].port)
            workers.append(
                harness.WorkerProcess(
                    name=f"host-{host.netns[-1]}",
                    workdir=tmp_path,
                    phase_delay=0.05,
                    wrap=host.wrap,
                    env={
                        "DATABASE_URL": f"postgres://postgres@{host.gateway}:{pair.primary.port}/{DATABASE}"
                        f"?application_name=fault-{host.netns}&connect_timeout=3",
                        "CELERY_BROKER_URL": broker,
                        "REMINDERS_CALLBACK_BROKER_URL": broker,
                        "REMINDERS_BATCH_SIZE": str(BATCH),
                    },
                )
            )
        worker_a = workers[0]
        harness.start_together(workers)
        env = {**os.environ, "DATABASE_URL": pair.url()}
        subprocess.run(  # the burst, due from 2 s on
            [
                sys.executable,
                "-m",
                "tests.faults.cluster_seed",
                "engine",
                queue,
                str(JOBS),
                "2",
                str(BURST_SECONDS),
            ],
            env=env,
            check=True,
            timeout=300,
        )
        db = pair.primary

        def delivered() -> int:
            return int(db.value("SELECT count(*) FROM reminders_occurrence WHERE status = 'delivered'"))

        with harness.Kicker():
            harness.wait_for(lambda: delivered() >= JOBS // 4, timeout=120, what="the burst under way")
            published = worker_a.count("published")
            assert worker_a.wait_phase("published", after=published, timeout=30), worker_a.log_tail()
            a.partition()
            cut_at = time.monotonic()
            time.sleep(0.2)
            held = {
                key
                for (key,) in db.connect().execute(
                    "SELECT idempotency_key FROM reminders_occurrence WHERE status = 'claimed'"
                )
            }
            delivered_at_cut = delivered()
            time.sleep(PARTITION_SECONDS)
            delivered_while_cut = delivered() - delivered_at_cut
            still_held = {
                key
                for (key,) in db.connect().execute(
                    "SELECT idempotency_key FROM reminders_occurrence"
                    " WHERE status <> 'delivered' AND idempotency_key = ANY(%s)",
                    [list(held)],
                )
            }
            a.heal()
            harness.wait_for(lambda: delivered() == JOBS, timeout=180, what="every occurrence delivered")
            healed_in = time.monotonic() - cut_at - PARTITION_SECONDS
            time.sleep(3)  # whatever A's sockets still held reaches the broker and the database
        assert held, "host A held no claimed rows at the cut"
        assert not still_held, f"{len(still_held)} rows A held were not taken over while it was cut off"
        assert delivered_while_cut > 0
        for worker in workers:
            assert worker.alive and worker.starts == 1, (
                f"{worker.name} had to be restarted\n{worker.log_tail()}"
            )
        arrivals = read_queue(settings.CELERY_BROKER_URL, queue, expect=JOBS, timeout=60)
        keys = {key for (key,) in db.connect().execute("SELECT idempotency_key FROM reminders_occurrence")}
        assert set(arrivals.by_message_id) == keys
        # Bound: the batch A had published and not marked (B publishes it again), and at most one more that
        # A's socket still held when the link came back.
        assert arrivals.duplicates <= 2 * BATCH, arrivals.duplicates
        failed = db.value("SELECT count(*) FROM reminders_occurrence WHERE status <> 'delivered'")
        assert failed == 0
    finally:
        for worker in workers:
            worker.stop()
        for proxy in proxies.values():
            proxy.close()
        harness.delete_queue(queue)
        pair.remove()
    harness.record(
        "host partitioned",
        f"2 workers on 2 hosts (network namespaces, own links to PostgreSQL and RabbitMQ); {JOBS} jobs over "
        f"{BURST_SECONDS:.0f} s; host A's link down for {PARTITION_SECONDS:.0f} s right after its worker "
        "published a batch, before the mark",
        f"{len(held)} rows A held at the cut delivered by host B while A was cut off ({delivered_while_cut} "
        f"delivered meanwhile); {JOBS}/{JOBS} delivered {healed_in:.1f} s after the link came back, same 2 "
        f"processes; {arrivals.duplicates} duplicates (same message_id); 0 failed",
    )


GATEWAY_TRAININGS = 150  # four pushes each (cluster_seed's team)
GATEWAY_BURST = 20.0
HEARTBEAT = 4
IN_FLIGHT = 10
GATEWAY_CUT_BOUND = 90.0  # the most A stays cut off, past PARTITION_SECONDS, while B finishes


def test_a_partitioned_gateway_host_hands_its_pushes_to_the_other_gateway(
    hosts: tuple[netns.Host, netns.Host], pg_template: PgTemplate, tmp_path: Path
) -> None:
    """A gateway on each host, host A cut off mid-burst (at least 20 s, until B is done): RabbitMQ misses
    A's heartbeats, closes its connection and gives the pushes A held unacked to B, which sends them while A
    is still cut off; A starts over by itself once its link is back (a new broker connection, nothing
    recorded sent again)."""
    from tests.peers.apns_fcm import FcmPeer, service_account

    a, b = hosts
    pair = PgPair(pg_template, listen=[a.gateway, b.gateway], standby=False)
    peer = FcmPeer(tmp_path)
    push_queue = f"test.hosts.push.{uuid.uuid4().hex[:10]}"
    proxies: list[harness.TcpProxy] = []
    gateways: dict[str, subprocess.Popen[bytes]] = {}
    worker: harness.WorkerProcess | None = None
    try:
        # The FCM peer, forwarded to the same port on each host's side of its link, and named localhost there
        # (its certificate's name).
        fcm_port = harness.TcpProxy(("127.0.0.1", peer.port), listen=a.gateway)
        proxies.append(fcm_port)
        proxies.append(harness.TcpProxy(("127.0.0.1", peer.port), listen=b.gateway, port=fcm_port.port))
        account, public_key = service_account(tmp_path, token_uri=f"https://localhost:{fcm_port.port}/token")
        peer.trust(public_key)
        with contextlib.closing(amqp_connection(settings.CELERY_BROKER_URL)) as conn:
            conn.channel().queue_declare(queue=push_queue, durable=True, auto_delete=False)
        for host in hosts:
            host.name_localhost()
            broker_proxy = harness.TcpProxy(harness.broker_address(), listen=host.gateway)
            proxies.append(broker_proxy)
            broker = broker_url(host.gateway, broker_proxy.port)
            env = {
                "DATABASE_URL": f"postgres://postgres@{host.gateway}:{pair.primary.port}/{DATABASE}"
                f"?application_name=fault-{host.netns}&connect_timeout=3",
                "CELERY_BROKER_URL": broker,
                "REMINDERS_CALLBACK_BROKER_URL": broker,
                "TRAININGS_PUSH_QUEUE": push_queue,
                "PUSH_FCM_CREDENTIALS_FILE": str(account),
                "PUSH_FCM_BASE_URL": f"https://localhost:{fcm_port.port}",
                "PUSH_TLS_CA_FILE": str(peer.ca_file),
                "TRAININGS_GATEWAY_IN_FLIGHT": str(IN_FLIGHT),
                "TRAININGS_GATEWAY_HEARTBEAT_SECONDS": str(HEARTBEAT),
                "REMINDERS_VAR_DIR": str(tmp_path / host.netns),
            }
            gateways[host.netns] = start_process(
                [*host.wrap, sys.executable, "manage.py", "push_gateway"],
                env={**os.environ, **env},
                log_path=tmp_path / f"gateway-{host.netns}.log",
            )
            if host is b:  # the engine's worker runs on host B
                worker = harness.WorkerProcess(name="host-b-worker", workdir=tmp_path, wrap=b.wrap, env=env)
                worker.start()
        subprocess.run(
            [sys.executable, "-m", "tests.faults.cluster_seed", "trainings", str(GATEWAY_TRAININGS), "2",
             str(GATEWAY_BURST)],
            env={**os.environ, "DATABASE_URL": pair.url()},
            check=True,
            timeout=300,
        )  # fmt: skip
        db = pair.primary
        total = GATEWAY_TRAININGS * 4

        def finished() -> int:
            return int(db.value("SELECT count(DISTINCT push_key) FROM delivery_pushsend"))

        with harness.Kicker():
            harness.wait_for(lambda: finished() >= total // 5, timeout=120, what="the pushes under way")
            a.partition()
            cut_at = time.monotonic()
            finished_at_cut = finished()
            # A stays cut off until B has finished everything (or the bound passes): B's pace on a loaded
            # machine decides how long that takes, not the property under test.
            time.sleep(PARTITION_SECONDS)
            all_while_cut = processes.wait_until(lambda: finished() == total, timeout=GATEWAY_CUT_BOUND)
            finished_while_cut = finished() - finished_at_cut
            cut_for = time.monotonic() - cut_at
            a.heal()
            harness.wait_for(lambda: finished() == total, timeout=120, what="every push finished")
            time.sleep(2 * HEARTBEAT)  # A notices its connection is gone and starts over
        logs = {name: (tmp_path / f"gateway-{name}.log").read_text(errors="replace") for name in gateways}
        for name, gateway in gateways.items():
            assert gateway.poll() is None, f"gateway on {name} exited:\n{logs[name][-3000:]}"
        assert all_while_cut, (
            f"host B finished only {finished_while_cut} pushes while A was cut off; the rest waited for A"
        )
        expected = {
            (key, token)
            for key, token in db.connect().execute(
                "SELECT p.key, d.token FROM trainings_push p"
                " JOIN delivery_device d ON d.player_id = p.player_id"
            )
        }
        sent = Counter((r.body["data"]["push"], r.token) for r in peer.received)
        assert len(expected) == total and not expected - set(sent)
        repeated = sum(n - 1 for n in sent.values())
        assert repeated <= IN_FLIGHT, repeated  # A's sends in flight at the cut, sent again by B
        started_over = "broker unavailable; starting over" in logs[a.netns]
    finally:
        for gateway in gateways.values():
            stop_process(gateway)
        if worker is not None:
            worker.stop()
        for proxy in proxies:
            proxy.close()
        peer.stop()
        harness.delete_queue(push_queue)
        pair.remove()
    harness.record(
        "push gateway host partitioned",
        f"a gateway on each of 2 hosts (AMQP heartbeat {HEARTBEAT} s), {total} pushes over "
        f"{GATEWAY_BURST:.0f} s; "
        f"host A's link down mid-burst until B had finished ({cut_for:.1f} s)",
        f"RabbitMQ closed A's silent connection and host B finished every push while A was cut off "
        f"({finished_while_cut} after the cut); {total}/{total} (push, device) sent, {repeated} sent twice "
        f"(bound: the sends A had in flight, TRAININGS_GATEWAY_IN_FLIGHT = {IN_FLIGHT}); A "
        f"{'started over by itself on a new connection' if started_over else 'kept running'}, "
        "neither restarted",
    )
