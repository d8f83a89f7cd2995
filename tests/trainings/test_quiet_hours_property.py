"""A property of quiet hours over random zones, windows and trainings around the 2025-2027 clock changes.

The pre-training reminders of one player (90 to 15 minutes before) fire in time order through the fire
path's decision (`quiet_status`, with what is still held for the player, as `reminders_fire` passes it);
a release job runs at each release instant and, like `held_pushes_release`, publishes what is due in fire
order or skips what is of no use. A fire at the same instant as a release runs first (the worst case).
Optionally the player answers at some instant: a later release withdraws, a later fire reaches nobody.

Every push ends sent, withdrawn or skipped with a reason; a held push's release is in its future and is
where the minute-by-minute oracle (tests/trainings/quiet_oracle.py) ends the window, or behind an earlier
held push; nothing is published inside a window (by the oracle); and sends never go out of fire order.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from functools import cache
from types import SimpleNamespace
from typing import Any
from zoneinfo import ZoneInfo

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.trainings import quiet_oracle
from trainings.models import PushStatus
from trainings.reminding.held import quiet_status

UTC = dt.UTC
ZONES = [
    "Europe/Paris",
    "America/New_York",
    "Australia/Lord_Howe",
    "Pacific/Chatham",
    "America/Santiago",
    "Australia/Sydney",
    "Europe/London",
]
OFFSETS = (90, 75, 60, 45, 30, 15)


@cache
def _changes(name: str) -> list[dt.datetime]:
    zone = ZoneInfo(name)
    return [at for year in (2025, 2026, 2027) for at in quiet_oracle.transitions(zone, year)]


@dataclass
class _Push:
    fire_at: dt.datetime
    status: str
    release_at: dt.datetime | None
    reason: str
    sent_at: dt.datetime | None = None
    behind: bool = False
    history: list[str] = field(default_factory=list)


def _time(minutes: int) -> dt.time:
    return dt.time(minutes // 60 % 24, minutes % 60)


@st.composite
def _cases(draw: st.DrawFn) -> dict[str, Any]:
    name = draw(st.sampled_from(ZONES))
    change = draw(st.sampled_from(_changes(name)))
    zone = ZoneInfo(name)
    near = change.astimezone(zone)
    near_minutes = near.hour * 60 + near.minute
    edge = st.integers(-90, 90).map(lambda d: near_minutes + d)  # an edge in or around the changed hour
    start = draw(st.one_of(edge, st.integers(0, 1439)))
    end = draw(st.one_of(edge, st.integers(0, 1439)))
    training = change + dt.timedelta(minutes=draw(st.integers(-8 * 60, 8 * 60)))
    answered = draw(st.one_of(st.none(), st.integers(-150, 0)))
    return {
        "zone": name,
        "start": _time(start),
        "end": _time(end),
        "training": training,
        "answered": training + dt.timedelta(minutes=answered) if answered is not None else None,
    }


def _run(case: dict[str, Any]) -> list[_Push]:
    """The player's pushes, fired in time order, with each release job at its instant."""
    zone, start = ZoneInfo(case["zone"]), case["training"]
    player = SimpleNamespace(pk=1, time_zone=case["zone"], quiet_start=case["start"], quiet_end=case["end"])
    training = SimpleNamespace(zone=zone, team=SimpleNamespace(quiet_start=None, quiet_end=None))
    answered: dt.datetime | None = case["answered"]
    pushes: list[_Push] = []
    jobs: set[dt.datetime] = set()

    def release(at: dt.datetime) -> None:
        for push in sorted(pushes, key=lambda p: p.fire_at):
            if push.status == PushStatus.HELD and push.release_at <= at:
                if answered is not None and answered <= at:
                    push.status, push.reason = PushStatus.WITHDRAWN, "answered while held"
                elif at >= start:
                    push.status, push.reason = PushStatus.SKIPPED, f"held until {at}, of no use after {start}"
                else:
                    push.status, push.sent_at = PushStatus.SENT, at

    for minutes in OFFSETS:
        fire_at = start - dt.timedelta(minutes=minutes)
        for at in sorted(j for j in jobs if j < fire_at):  # releases due before this fire; equal ones after
            release(at)
            jobs.discard(at)
        if answered is not None and answered <= fire_at:
            continue  # the fire-time re-check reaches nobody
        still_held = [p.release_at for p in pushes if p.status == PushStatus.HELD and p.release_at]
        status, release_at, reason = quiet_status(
            player,
            training,
            fire_at,
            start,
            held_until=max(still_held, default=None),
        )
        push = _Push(fire_at, status, release_at, reason, behind=reason.startswith("behind"))
        if status == PushStatus.PENDING:
            push.status, push.sent_at = PushStatus.SENT, fire_at
        elif status == PushStatus.HELD:
            assert release_at is not None
            jobs.add(release_at)
        pushes.append(push)
    for at in sorted(jobs):
        release(at)
    return pushes


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=_cases())
def test_every_push_is_sent_withdrawn_or_skipped_in_fire_order_and_never_held_past_its_release(
    case: dict[str, Any],
) -> None:
    zone, start = ZoneInfo(case["zone"]), case["training"]
    since = (start - dt.timedelta(hours=32)).replace(second=0, microsecond=0)
    windows = quiet_oracle.windows(case["start"], case["end"], zone, since, start + dt.timedelta(hours=8))
    pushes = _run(case)

    for push in pushes:
        assert push.status in {PushStatus.SENT, PushStatus.WITHDRAWN, PushStatus.SKIPPED}, push
        if push.status != PushStatus.SENT:
            assert push.reason, push
        oracle_end = quiet_oracle.release(push.fire_at, windows)
        if push.release_at is not None:  # it was held
            assert push.release_at > push.fire_at, push  # a release in its future
            assert push.behind or push.release_at == oracle_end, (push, oracle_end)
            if push.status == PushStatus.SENT:
                assert push.sent_at == push.release_at, push  # never held past its release
        elif push.status == PushStatus.SENT:
            assert oracle_end is None and not push.behind, (push, oracle_end)  # outside every window
        elif push.status == PushStatus.SKIPPED:
            assert push.behind or (oracle_end is not None and oracle_end >= start), (push, oracle_end)
        if push.sent_at is not None:
            assert push.sent_at < start
            assert quiet_oracle.release(push.sent_at, windows) is None, push  # not inside a window
    sent = [p.sent_at for p in sorted(pushes, key=lambda p: p.fire_at) if p.sent_at is not None]
    assert sent == sorted(sent)  # fire order
