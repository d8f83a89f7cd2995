"""8j: the storm against FCM's project quota (delivery/gateway/quota.py), in the storm's run (storm.py).

FCM allows a project 600,000 sends a minute by default: a million pushes to Android take at least 100 s.
Here the quota is scaled to the run (0.6 a minute per push of the storm: 60,000 a minute for 100,000
pushes), the loopback FCM peer enforces it per minute as FCM does (429 RESOURCE_EXHAUSTED past it), and
1 worker + 2 gateways send the storm with PUSH_FCM_QUOTA_PER_MINUTE set to it: they pace the project
together through the database. The row passes with 0 pushes lost, 0 accepted past their expiry, the last
FCM push within 5 % of the earliest instant the quota allows, and at most one 429 per minute per gateway.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable
from typing import Any

from bench.report import Row

QUOTA_PER_PUSH = 0.6  # a minute's quota per push of the run: 600,000 for 1,000,000
GATEWAYS = 2


def quota_round(storm: Any, peers: Any, round_: Callable[..., dict[str, Any]]) -> dict[str, Any]:
    """The round, the FCM peer enforcing the scaled quota meanwhile; its figures under `quota`."""
    per_minute = max(60, int(storm.pushes * QUOTA_PER_PUSH))
    peers.quota_set(per_minute)
    try:
        result = round_(
            "quota", workers=1, gateways=GATEWAYS, env={"PUSH_FCM_QUOTA_PER_MINUTE": str(per_minute)}
        )
        log = peers.quota_log()
    finally:
        peers.quota_set(0)
    instant = result["instant_at"]
    sent = sorted(at for at, status in log if status == 200)
    refused = Counter(int(at // 60) for at, status in log if status == 429)
    share = per_minute / 60
    # The n-th send's earliest second: the shares of the seconds from the instant's add up to n.
    allowed = math.floor(instant) + math.ceil(len(sent) / share) - 1 - instant if sent else math.nan
    result["quota"] = {
        "per_minute": per_minute, "fcm_sent": len(sent), "last": sent[-1] - instant if sent else math.nan,
        "allowed": allowed, "refused": dict(refused), "past_expiry": _past_expiry(),
    }  # fmt: skip
    return result


def _past_expiry() -> int:
    """The storm's pushes a device accepted after their expiry (the send's row is recorded after the
    acceptance: an upper bound of when it was sent)."""
    from django.db import connection

    from delivery import models as dm
    from trainings import models as tm

    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            SELECT count(*) FROM {tm.Push._meta.db_table} AS p
             WHERE p.key LIKE 'storm-%%' AND p.expires_at IS NOT NULL
               AND EXISTS (SELECT 1 FROM {dm.PushSend._meta.db_table} AS s
                            WHERE s.push_key = p.key AND s.status = 'accepted'
                              AND s.recorded_at > p.expires_at)
            """
        )
        return int(cursor.fetchone()[0])


def quota_row(result: dict[str, Any], pushes: int) -> Row:
    q = result["quota"]
    lost = pushes - result["accepted"]
    ratio = q["last"] / q["allowed"] if q["allowed"] and q["allowed"] > 0 else math.nan
    worst = max(q["refused"].values(), default=0)
    passed = lost == 0 and q["past_expiry"] == 0 and ratio <= 1.05 and worst <= GATEWAYS
    return Row(
        f"8j storm at the FCM quota ({q['per_minute']:,}/min, 1 worker + {GATEWAYS} gateways): last FCM push",
        q["last"],
        q["allowed"],
        "earliest the quota allows",
        "s",
        ratio,
        "of allowed",
        "≤ 1.05x, 0 lost, 0 past expiry, ≤ 1 429/min/gateway",
        passed=passed,
        note=f"{q['fcm_sent']:,} FCM sends accepted, {result['accepted']:,}/{pushes:,} pushes accepted "
        f"({lost:,} lost), {q['past_expiry']} past their expiry, 429s per minute window {q['refused'] or 0} "
        f"(at most {worst} in one, {GATEWAYS} gateways); APNs unpaced",
    )


def pacing_row(paced: dict[str, Any], unpaced: dict[str, Any], ratio: float) -> Row:
    """8k: the gateway's CPU per push to the peers with FCM paced at its default quota (the storm row) and
    unpaced, in the same run (their median rounds; `ratio`, the median of the alternations' ratios): what
    the pacing itself costs."""
    on, off = paced["cpu_us"]["gateway"], unpaced["cpu_us"]["gateway"]
    pg_on, pg_off = paced["cpu_us"]["postgresql"], unpaced["cpu_us"]["postgresql"]
    return Row(
        "8k storm gateway CPU per push, FCM paced at 600,000/min / unpaced",
        on,
        off,
        "unpaced (PUSH_FCM_QUOTA_PER_MINUTE=0)",
        "µs",
        ratio,
        "of unpaced",
        note=f"same run, alternated, the median of the rounds' ratios; 1 worker + 1 gateway to the peers; "
        f"PostgreSQL {pg_on:,.0f} vs {pg_off:,.0f} "
        "µs/push; "
        f"last push {paced['instant_to_last']:.2f} vs {unpaced['instant_to_last']:.2f} s after the instant",
    )
