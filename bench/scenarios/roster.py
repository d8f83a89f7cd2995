"""14. The bulk roster sync: `POST /api/roster/` with a club of N players (10,000; 1,000 with --quick), sent
once to create it all and once more unchanged.

The club: N / 500 teams of 500 players, each player with an email address and a guardian (one for every
two players: siblings share a parent) with an address of their own: N players, N memberships, N / 2
guardians, N guardianships and 1.5 N email devices. The request goes through Django's handler in this
process (middleware, token authentication, JSON parsing, the serializers, the sync and its transaction),
as an integration caller's token. The alternative, in the same run, is the floor of those writes: the
same rows put with the ORM's `bulk_create` alone in one transaction, under another owner, with no
reading, checking or comparing. Each figure is the wall time of one call with this process's CPU time
beside it (a shared machine's load moves the wall time much more).
Target: 10,000 players in one call within 10 s, created and unchanged.
"""

from __future__ import annotations

import json
import os
import resource
import time
from typing import Any

from bench.harness import Harness
from bench.report import Row, Section

TARGET_S = 10.0
TEAM_SIZE = 500


def _club(n: int, tag: str) -> dict[str, Any]:
    teams = []
    for t in range(max(1, n // TEAM_SIZE)):
        players = []
        for i in range(t * TEAM_SIZE, min(n, (t + 1) * TEAM_SIZE)):
            family = i // 2
            guardian = {"external_id": f"{tag}-g{family}", "name": f"Parent {family}",
                        "email": f"{tag}.parent{family}@example.com", "relation": "mother"}  # fmt: skip
            players.append({"external_id": f"{tag}-p{i}", "name": f"Player {i}", "language": "fr",
                            "email": f"{tag}.player{i}@example.com", "guardians": [guardian]})  # fmt: skip
        teams.append({"external_id": f"{tag}-t{t}", "name": f"Team {t}", "time_zone": "Europe/Paris",
                      "players": players})  # fmt: skip
    return {"teams": teams, "deactivate_missing": True}


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _floor(owner: Any, club: dict[str, Any]) -> tuple[float, float]:
    """The same rows with bulk_create alone: (wall seconds, CPU seconds)."""
    from django.db import transaction

    from delivery import models as dm
    from trainings import models as tm

    wall, cpu = time.perf_counter(), _cpu()
    with transaction.atomic():
        teams = tm.Team.objects.bulk_create(
            [tm.Team(owner=owner, external_id=t["external_id"], name=t["name"], time_zone=t["time_zone"])
             for t in club["teams"]]
        )  # fmt: skip
        rows = [(team, p) for team, t in zip(teams, club["teams"], strict=True) for p in t["players"]]
        players = tm.Player.objects.bulk_create(
            [tm.Player(owner=owner, external_id=p["external_id"], name=p["name"], language=p["language"],
                       time_zone="Europe/Paris") for _, p in rows], batch_size=2_000,
        )  # fmt: skip
        tm.Membership.objects.bulk_create(
            [
                tm.Membership(team=team, player=player)
                for (team, _), player in zip(rows, players, strict=True)
            ],
            batch_size=2_000,
        )
        parents: dict[str, Any] = {}
        for _, p in rows:
            g = p["guardians"][0]
            guardian = tm.Guardian(owner=owner, external_id=g["external_id"], name=g["name"], time_zone="UTC")
            parents.setdefault(g["external_id"], guardian)
        tm.Guardian.objects.bulk_create(list(parents.values()), batch_size=2_000)
        wards = [
            tm.Guardianship(player=player, guardian=parents[p["guardians"][0]["external_id"]], relation="m")
            for (_, p), player in zip(rows, players, strict=True)
        ]
        tm.Guardianship.objects.bulk_create(wards, batch_size=2_000)
        devices = [
            dm.Device(provider="email", platform="email", token=p["email"], player=player)
            for (_, p), player in zip(rows, players, strict=True)
        ]
        devices += [
            dm.Device(provider="email", platform="email", token=f"{g.external_id}@floor.example", guardian=g)
            for g in parents.values()
        ]
        dm.Device.objects.bulk_create(devices, batch_size=2_000)
    return time.perf_counter() - wall, _cpu() - cpu


def run(h: Harness) -> Section:
    from django.conf import settings
    from django.contrib.auth.models import Permission, User
    from django.test import Client
    from rest_framework.authtoken.models import Token

    section = Section("roster")
    n = 1_000 if h.quick else 10_000
    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "testserver"]
    # The webhooks scenario, earlier in the same run, may have made the platform's user already.
    caller, _ = User.objects.get_or_create(username="bench-platform")
    caller.user_permissions.add(Permission.objects.get(codename="use_integration_api"))
    token = Token.objects.get_or_create(user=caller)[0].key
    floor_owner = User.objects.create_user("bench-floor")
    club = _club(n, "club")
    body = json.dumps(club)
    client = Client()

    def sync() -> tuple[float, float, Any]:
        wall, cpu = time.perf_counter(), _cpu()
        response = client.post("/api/roster/", body, content_type="application/json",
                               HTTP_AUTHORIZATION=f"Token {token}")  # fmt: skip
        return time.perf_counter() - wall, _cpu() - cpu, response

    # Warm the handler (imports, URL resolver, the token lookup) on a club of two of another caller's.
    warmer = User.objects.create_user("bench-warm")
    warmer.user_permissions.add(Permission.objects.get(codename="use_integration_api"))
    warm = json.dumps(_club(2, "warm"))
    warm_token = Token.objects.create(user=warmer).key
    client.post(
        "/api/roster/", warm, content_type="application/json", HTTP_AUTHORIZATION=f"Token {warm_token}"
    )
    load_start = os.getloadavg()[0]
    created_s, created_cpu, created = sync()
    print(f"  created: {created_s:.2f} s ({created.status_code}) {created.content[:300]!r}", flush=True)
    unchanged_s, unchanged_cpu, unchanged = sync()
    print(
        f"  unchanged: {unchanged_s:.2f} s ({unchanged.status_code}) {unchanged.content[:300]!r}", flush=True
    )
    floor_s, floor_cpu = _floor(floor_owner, _club(n, "floor"))
    print(f"  floor (bulk_create alone): {floor_s:.2f} s", flush=True)

    load = f"load average {load_start:.1f} at the start, {os.getloadavg()[0]:.1f} at the end"
    counts = created.json() if created.status_code == 200 else {}
    again = unchanged.json() if unchanged.status_code == 200 else {}
    all_created = counts.get("players", {}).get("created") == n
    nothing = bool(again) and all(v == {"created": 0, "updated": 0, "deactivated": 0} for v in again.values())
    size = f"{len(body) / 1e6:.1f} MB body, {len(club['teams'])} teams"
    section.rows += [
        Row(
            f"14a roster sync of {n:,} players, created (POST /api/roster/, {size})",
            created_s,
            floor_s,
            "bulk_create of the same rows alone",
            "s",
            created_s / floor_s,
            "of floor",
            f"≤ {TARGET_S:.0f} s",
            passed=created_s <= TARGET_S and all_created,
            note=f"status {created.status_code}; counts {counts}; CPU of this process {created_cpu:.2f} s "
            f"(floor {floor_cpu:.2f} s); {load}",
        ),
        Row(
            f"14b roster sync of {n:,} players, unchanged (the same body again)",
            unchanged_s,
            floor_s,
            "bulk_create of the same rows alone",
            "s",
            unchanged_s / floor_s,
            "of floor",
            f"≤ {TARGET_S:.0f} s, nothing written",
            passed=unchanged_s <= TARGET_S and nothing,
            note=f"status {unchanged.status_code}; counts {again}; CPU of this process "
            f"{unchanged_cpu:.2f} s; {load}",
        ),
    ]
    section.data = {"created_s": created_s, "unchanged_s": unchanged_s, "floor_s": floor_s,
                    "created_cpu": created_cpu, "unchanged_cpu": unchanged_cpu, "players": n}  # fmt: skip
    return section
