"""Prometheus metrics of the push pipeline: pushes queued by the reminder handler, the gateway's outcome per
push and per device send, held pushes found overdue, and the gateway's heartbeat.

Recorded the same way as the engine's (reminders/ops/metrics.py): one function per event, and in
prometheus-client's multiprocess mode when `PROMETHEUS_MULTIPROC_DIR` is set, so the web's `/metrics`
sums every process's samples.
"""

from __future__ import annotations

import collections
import time
from collections.abc import Iterable, Mapping
from typing import Any

from prometheus_client import Counter, Gauge

from delivery.domain import DOMAIN

PUSHES = Counter(
    "trainings_pushes",
    "Pushes by kind (the kinds table's codes): queued by the reminder handler, then the gateway's outcome.",
    ["kind", "outcome"],
)
PUSH_DEVICES = Counter(
    "trainings_push_provider_sends",
    "Device sends by provider and outcome (accepted, token_dead, retry, failed).",
    ["provider", "outcome"],
)
HELD_OVERDUE = Counter(
    "trainings_held_pushes_overdue",
    "Pushes found still held past their release plus the grace by the hourly check, by what it did "
    "(released, skipped, withdrawn). Any is a bug: a held push always has a release in its future.",
    ["action"],
)
GATEWAY_HEARTBEAT = Gauge(
    "trainings_gateway_heartbeat_timestamp_seconds",
    "Last time a push gateway polled its queue (Unix time); the newest of all gateways on this host.",
    multiprocess_mode="max",
)

_enabled = True


def set_enabled(enabled: bool) -> None:
    """Turn every recording function into a no-op (as the engine's metrics can be, for the benchmark)."""
    global _enabled
    _enabled = enabled


def pushes_queued(kinds: Iterable[str]) -> None:
    """The reminder handler published these pushes (one kind each) to the push queue."""
    if _enabled:
        for kind, count in collections.Counter(kinds).items():
            PUSHES.labels(kind, "queued").inc(count)


def pushes_handled(handled: Iterable[tuple[Any, str]]) -> None:
    """The gateway's outcome for each push of a round (delivered, no_device, stale, duplicate, retry, ...),
    counted per (kind, outcome) before the counters are touched (a labelled counter takes a lock)."""
    if not _enabled:
        return
    counts: collections.Counter[tuple[str, str]] = collections.Counter()
    for body, outcome in handled:
        kind = body.get("kind") if isinstance(body, dict) else None
        # A malformed message's "kind" is whatever the sender wrote: only the table's codes become labels.
        counts[kind if isinstance(kind, str) and kind in DOMAIN.kinds() else "unknown", str(outcome)] += 1
    for labels, count in counts.items():
        PUSHES.labels(*labels).inc(count)


def push_device_outcomes(outcomes: Iterable[tuple[str, str]]) -> None:
    """One (provider, verdict) per device send: accepted, token_dead, retry, failed."""
    if _enabled:
        for (provider, verdict), count in collections.Counter(outcomes).items():
            PUSH_DEVICES.labels(provider, verdict).inc(count)


def held_pushes_overdue(actions: Mapping[str, int]) -> None:
    """The hourly check found pushes held past their release and released, skipped or withdrew them."""
    if _enabled:
        for action, count in actions.items():
            HELD_OVERDUE.labels(action).inc(count)


def gateway_alive() -> None:
    """The gateway polled its queue (called on every poll, idle or not)."""
    if _enabled:
        GATEWAY_HEARTBEAT.set(time.time())
