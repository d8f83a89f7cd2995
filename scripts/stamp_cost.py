"""What the devices' `last_success_at` stamps cost PostgreSQL, batched (delivery/gateway/stamps.py: one
UPDATE for every device accepted since the last minute) against the per-commit stamps the gateway wrote
before (an UPDATE of each recorder commit's devices, 40 a commit). Client wall time of the statements,
three alternations; docs/benchmarks.md has the figures.

    DATABASE_URL=postgres://... python scripts/stamp_cost.py

It makes 10,000 players with a device each in that database (a scratch one: `createdb` it and run
`manage.py migrate` first), and deletes them at the end.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

import django

django.setup()

from django.db import connection, transaction  # noqa: E402
from django.db.models import Q  # noqa: E402
from django.utils import timezone  # noqa: E402

from delivery.gateway.stamps import SUCCESS_EVERY, Stamps  # noqa: E402
from delivery.models import Device  # noqa: E402
from trainings.models import Player  # noqa: E402

DEVICES = 10_000
PER_COMMIT = 40


def _reset(ids: list[int]) -> None:
    Device.objects.filter(pk__in=ids).update(last_success_at=None)
    with connection.cursor() as cursor:
        cursor.execute(f"VACUUM ANALYZE {Device._meta.db_table}")


def _per_commit(ids: list[int]) -> float:
    spent = 0.0
    for start in range(0, len(ids), PER_COMMIT):
        with transaction.atomic():
            began = time.perf_counter()
            now = timezone.now()
            old = Q(last_success_at__isnull=True) | Q(last_success_at__lt=now - SUCCESS_EVERY)
            Device.objects.filter(old, pk__any=ids[start : start + PER_COMMIT]).update(last_success_at=now)
            spent += time.perf_counter() - began
    return spent


def _batched(ids: list[int]) -> float:
    stamps = Stamps()
    stamps.add(ids, at=timezone.now())
    began = time.perf_counter()
    assert stamps.write() == len(ids)
    return time.perf_counter() - began


def main() -> None:
    players = Player.objects.bulk_create([Player(name=f"stamp-cost-{i}") for i in range(DEVICES)])
    devices = Device.objects.bulk_create(
        [
            Device(player=p, provider="fcm", platform="android", token=f"stamp-cost-{i}")
            for i, p in enumerate(players)
        ]
    )
    ids = sorted(d.pk for d in devices)
    try:
        per_commit, batched = [], []
        for _ in range(3):
            _reset(ids)
            per_commit.append(_per_commit(ids) / len(ids) * 1e6)
            _reset(ids)
            batched.append(_batched(ids) / len(ids) * 1e6)
        for name, runs in ((f"per commit ({PER_COMMIT} a statement)", per_commit),
                           (f"batched (one UPDATE of {len(ids):,})", batched)):  # fmt: skip
            median = statistics.median(runs)
            print(f"{name}: {', '.join(f'{r:.1f}' for r in runs)} µs a device, median {median:.1f}")
    finally:
        Player.objects.filter(pk__in=[p.pk for p in players]).delete()


if __name__ == "__main__":
    main()
