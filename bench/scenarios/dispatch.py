"""2. Dispatch throughput: a backlog of due occurrences drained by one worker, beside the broker's limit.

The worker is the scan loop itself, in this process: `occurrences_dispatch_for(until_idle=True)` with the
default batch size, the loop one `scan_due` task runs, stopping when nothing more is due. Counted as done
only when every message is on the queue (counted on the broker after each round, then purged, so that
each round starts on an empty queue like the raw publisher's) and every row is marked delivered (checked
in the database).

The raw limit is measured the same way on the same broker, with no database at all: py-amqp, a durable
queue, persistent messages of the same size and headers, one AMQP transaction per 500; and, for scale,
one publisher confirm awaited per message.
"""

from __future__ import annotations

import contextlib
import json
import time
from datetime import UTC, datetime, timedelta

import amqp
from amqp import spec

from bench.harness import PAYLOAD, Harness
from bench.processes import declared_counts
from bench.report import RoundRatios, Row, Section

_WARM_UP = 1000


def run(h: Harness) -> Section:
    from reminders.engine.dispatch import occurrences_dispatch_for
    from reminders.models import Occurrence, OccurrenceStatus
    from reminders.transports import get_transport

    s = h.sizes
    section = Section("dispatch")
    # The machine is shared: the scan and the raw publisher take turns in rounds, so a burst of someone
    # else's load hits both rather than one of them.
    rounds = 4 if h.quick else 5
    per_round, raw_per_round, confirm_per_round = (
        s.dispatch_backlog // rounds,
        s.raw_tx // rounds,
        s.raw_confirm // rounds,
    )
    n = per_round * rounds
    h.truncate_engine()
    queue = h.queue_name("dispatch")
    h.declare(queue)
    jobs = h.insert_jobs("dispatch", max(1, per_round // 22), queue=queue)
    get_transport("rabbitmq")  # connect before the clock starts, as a running worker already has
    # Warm up untimed, as a running worker is: the first drain of the process (query compilation, first
    # connections) landed in whichever of the with/without-metrics drains came first.
    _drain_without_metrics(h, jobs, _WARM_UP, "warm-up", queue, metrics_on=True)
    ours_s = ours_cpu = raw_s = raw_cpu = confirm_s = batched_s = 0.0
    round_ratios: list[float] = []
    on_queue = 0
    bare_s = bare_cpu = 0.0
    metric_ratios: list[float] = []
    for r in range(rounds):
        # The cost of metrics: the same backlog drained once more with every metrics call a no-op, before
        # or after the measured drain in alternate rounds, so warm-up favours neither.
        if r % 2:
            bare_round, cpu = _drain_without_metrics(h, jobs, per_round, f"bare-{r}", queue)
            bare_s, bare_cpu = bare_s + bare_round, bare_cpu + cpu
        now = datetime.now(UTC)
        h.insert_occurrences(
            f"dispatch-{r}", jobs, per_round, first=now - timedelta(seconds=120), step_seconds=60 / per_round
        )
        _analyze()
        start, cpu_start = time.perf_counter(), time.process_time()
        result, _ = occurrences_dispatch_for(seconds=3600, until_idle=True)
        assert result.delivered == per_round, result
        elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu_start
        ours_s, ours_cpu = ours_s + elapsed, ours_cpu + cpu
        # Counted, then emptied: the raw publisher starts every round on an empty queue, and a queue
        # holding 20,000 more messages made the same raw publisher 10-30 % slower (docs/benchmarks.md).
        on_queue += h.purge_queue(queue)
        if not r % 2:
            bare_round, cpu = _drain_without_metrics(h, jobs, per_round, f"bare-{r}", queue)
            bare_s, bare_cpu = bare_s + bare_round, bare_cpu + cpu
        metric_ratios.append(bare_round / elapsed)
        raw_elapsed, raw_cpu_round = _raw_publish(h, raw_per_round, per_transaction=500)
        raw_s, raw_cpu = raw_s + raw_elapsed, raw_cpu + raw_cpu_round
        confirm_s += _raw_publish(h, confirm_per_round, confirm=True)[0]
        batched_s += _raw_publish(h, raw_per_round, per_transaction=500, batched=True)[0]
        round_ratios.append((per_round / elapsed) / (raw_per_round / raw_elapsed))
    # Less the rows of the warm-up and of the rounds without metrics (each asserted complete as it ran).
    delivered = Occurrence.objects.filter(status=OccurrenceStatus.DELIVERED).count() - n - _WARM_UP
    h.delete_queue(queue)
    ours = n / ours_s
    raw_tx = raw_per_round * rounds / raw_s
    raw_confirm = confirm_per_round * rounds / confirm_s
    raw_batched = raw_per_round * rounds / batched_s
    cpu_us, raw_cpu_us = ours_cpu / n * 1e6, raw_cpu / (raw_per_round * rounds) * 1e6
    bare = n / bare_s
    bare_cpu_us = bare_cpu / n * 1e6
    complete = delivered == n and on_queue == n
    vs_raw, vs_bare = RoundRatios(tuple(round_ratios)), RoundRatios(tuple(metric_ratios))
    section.rows += [
        Row(
            f"2a dispatch, one worker ({n:,} due)",
            ours,
            raw_confirm,
            "raw confirm per msg",
            "occ/s",
            ours / raw_confirm,
            "vs confirm/msg",
            "≥ 5,000 occ/s",
            ours >= 5000 and complete,
            note=f"{n:,} claimed, published (one AMQP tx per batch of 1,000) and marked in {ours_s:.1f} s "
            f"over {rounds} rounds; delivered rows {delivered:,}, "
            f"messages on queue {on_queue:,}",
        ),
        Row(
            "2b dispatch / raw durable publish limit",
            ours,
            raw_tx,
            "raw py-amqp, tx per 500",
            "occ/s",
            vs_raw.median,
            "of raw",
            "≥ 0.80x",
            vs_raw.median >= 0.8 and complete,
            note=f"ratio: {vs_raw.describe()}; CPU of this process: "
            f"{cpu_us:.0f} µs per occurrence (claim + load + publish + mark) "
            f"vs {raw_cpu_us:.0f} µs per raw message",
        ),
        Row(
            "2c dispatch with metrics / without (same run)",
            ours,
            bare,
            "metrics calls off",
            "occ/s",
            vs_bare.median,
            "of without",
            "≥ 0.95x",
            vs_bare.median >= 0.95,
            note=f"CPU per occurrence {cpu_us:.1f} µs with metrics, {bare_cpu_us:.1f} µs without; "
            f"{n:,} occurrences each way, drained in alternating order; ratio: {vs_bare.describe()}",
        ),
    ]
    section.rows.append(
        Row(
            "2d dispatch / raw publish, frames in batched writes",
            ours,
            raw_batched,
            "raw, one write per 500",
            "occ/s",
            ours / raw_batched,
            "of raw",
            "",
            None,
            note="the raw publisher of 2b writing each transaction's frames in one socket write, as the "
            "project's transport does (common/wire/amqp_frames.py): the broker's own limit",
        )
    )
    section.data = {
        "backlog": n,
        "rounds": rounds,
        "seconds": ours_s,
        "rate": ours,
        "delivered": delivered,
        "on_queue": on_queue,
        "cpu_us_per_occ": cpu_us,
        "raw_cpu_us_per_msg": raw_cpu_us,
        "raw_tx_500": raw_tx,
        "raw_confirm_each": raw_confirm,
        "raw_tx_500_batched_writes": raw_batched,
        "round_ratios": round_ratios,
        "ratio_vs_raw_median": vs_raw.median,
        "ratio_vs_without_metrics_median": vs_bare.median,
        "rate_without_metrics": bare,
        "cpu_us_per_occ_without_metrics": bare_cpu_us,
        "bars": {
            "dispatch: this project": ours,
            "raw publish: tx per 500": raw_tx,
            "raw publish: confirm per msg": raw_confirm,
        },
    }
    h.truncate_engine()
    return section


def _drain_without_metrics(
    h: Harness, jobs: list[int], count: int, label: str, queue: str, *, metrics_on: bool = False
) -> tuple[float, float]:
    """(seconds, CPU seconds) to dispatch `count` due occurrences with reminders.ops.metrics switched off."""
    from reminders.engine.dispatch import occurrences_dispatch_for
    from reminders.ops import metrics

    now = datetime.now(UTC)
    h.insert_occurrences(label, jobs, count, first=now - timedelta(seconds=120), step_seconds=60 / count)
    _analyze()
    metrics.set_enabled(metrics_on)
    try:
        start, cpu_start = time.perf_counter(), time.process_time()
        result, _ = occurrences_dispatch_for(seconds=3600, until_idle=True)
        elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    finally:
        metrics.set_enabled(True)
    assert result.delivered == count, result
    assert h.purge_queue(queue) == count
    return elapsed, cpu


def _analyze() -> None:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("ANALYZE reminders_occurrence")
        cursor.execute("ANALYZE reminders_job")


def _raw_publish(
    h: Harness, count: int, *, per_transaction: int = 0, confirm: bool = False, batched: bool = False
) -> tuple[float, float]:
    """(seconds, CPU seconds) for `count` durable publishes of the body and headers the project sends.

    `batched`: each transaction's frames go to the socket in one write, as the project's transport writes
    them, rather than one write per message (py-amqp's `send_method`).
    """
    from common.wire.amqp_frames import FrameBuffer, PublishEncoder

    queue = h.queue_name("raw-confirm" if confirm else "raw-tx")
    body = json.dumps(PAYLOAD, separators=(",", ":")).encode()
    fire_at = datetime.now(UTC).isoformat()
    with contextlib.closing(h.amqp_connection()) as conn:
        channel = conn.channel()
        channel.queue_declare(queue, durable=True, auto_delete=False)
        if confirm:
            channel.confirm_select()
        else:
            channel.tx_select()
        assert channel.channel_id is not None
        encoder = PublishEncoder(channel.channel_id, conn.frame_max)
        frames = FrameBuffer(conn.transport.write)
        start, cpu_start = time.perf_counter(), time.process_time()
        for i in range(count):
            message = amqp.Message(
                body=body,
                content_type="application/json",
                content_encoding="utf-8",
                delivery_mode=2,
                message_id=f"raw-{i:032d}",
                application_headers={"job_key": f"bench-raw-{i}", "fire_at": fire_at, "attempt": 1},
            )
            if batched:
                frames.add(
                    encoder.message(
                        queue,
                        body,
                        message_id=f"raw-{i:032d}",
                        job_key=f"bench-raw-{i}",
                        fire_at=fire_at,
                        attempt=1,
                    )
                )
                if (i + 1) % per_transaction == 0:
                    frames.flush()
                    channel.tx_commit()
                continue
            if confirm:
                channel.basic_publish_confirm(message, exchange="", routing_key=queue, mandatory=True)
            else:
                # The same call the project's transport makes: basic_publish would also poll the socket
                # after every message, which would understate the raw limit.
                channel.send_method(spec.Basic.Publish, "Bssbb", (0, "", queue, True, False), message)
                if (i + 1) % per_transaction == 0:
                    channel.tx_commit()
        if not confirm:
            frames.flush()
            channel.tx_commit()
        elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu_start
        depth, _ = declared_counts(channel, queue)
        assert depth == count, (depth, count)
    h.delete_queue(queue)
    return elapsed, cpu
