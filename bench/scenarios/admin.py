"""12. Admin pages on the demo data: every page a coach and an operator open, in milliseconds, with its SQL
statement count.

The data is `manage.py demo_trainings` (what `make run` shows a newcomer) made to have happened: the coach
clicks "Remind now" for each rule of each demo training, the push gateway (`manage.py push_gateway`, the
logging provider) sends the pushes, a schedule exists, some occurrences are retrying and some failed.
Each page is requested through Django's handler with a logged-in client (the demo's coach, and a
superuser as the operator), once to warm and then ROUNDS times; the figure is the median, with the median
CPU time of this process (Django and the client, not PostgreSQL) beside it, which a shared machine's load
moves far less than the wall time. The alternative
is Django's own admin changelist of auth groups, in the same rounds: the floor of an admin page on this
machine at this moment.

Then the demo team grows tenfold (40 more players with devices, reminded and sent again) and each page's
statements are counted again: a count that grows with the rows is an N+1.
Target: every page <= 300 ms.
"""

from __future__ import annotations

import io
import statistics
import sys
import time
import uuid
from typing import Any

from bench.harness import Harness
from bench.report import Row, Section

TARGET_MS = 300.0
GROWN_PLAYERS = 40


def _demo(h: Harness) -> None:
    """The demo's data alone, with its reminders sent: pushes, device sends, a schedule, stuck work.

    What other scenarios of the run left (thousands of players and trainings) is removed first: an
    operator's player dropdowns list every player, so the pages would measure those scenarios' data."""
    from django.core.management import call_command
    from django.db import connection
    from django.test import override_settings

    from delivery import models as dm
    from trainings import models as tm

    h.truncate_engine()
    tables = [m._meta.db_table for m in (tm.Player, tm.Team, tm.Training, dm.PushSend)]
    with connection.cursor() as cursor:
        cursor.execute(f"TRUNCATE {', '.join(tables)} RESTART IDENTITY CASCADE")

    with override_settings(DEBUG=True):
        call_command("demo_trainings", stdout=io.StringIO())
    _remind_and_send(h, "demo")
    _schedule()
    _stuck_work()


def _remind_and_send(h: Harness, tag: str) -> int:
    """Remind now, every rule of every demo training, then let the gateway send what was published."""
    from trainings import models as tm
    from trainings.reminding.remind_now import training_remind_now

    h.declare(h.push_queue)
    before = h.queue_depth(h.push_queue)[0]
    for training in tm.Training.objects.filter(team__name="Demo U15"):
        for rule in tm.ReminderRule.objects.all():
            training_remind_now(training=training, rule=rule, click=f"{tag}-{uuid.uuid4().hex[:8]}")
    published = h.queue_depth(h.push_queue)[0] - before
    if published:
        proc = h.start(
            f"push-gateway-admin-{tag}",
            [sys.executable, "manage.py", "push_gateway", "--max-messages", str(published),
             "--idle-seconds", "10"],
        )  # fmt: skip
        proc.wait(timeout=300)
    return published


def _schedule() -> None:
    from reminders.jobs import Callback
    from reminders.models import CallbackType
    from reminders.schedules.lifecycle import ScheduleSpec, schedule_upsert

    schedule_upsert(
        key="bench-admin-weekly-digest",
        spec=ScheduleSpec(
            expression="0 8 * * MON", timezone="Europe/Paris",
            callback=Callback(CallbackType.RABBITMQ, "bench.digest", {"report": "weekly"}),
        ),
    )  # fmt: skip


def _stuck_work() -> None:
    """Three of the demo's future occurrences retrying after an HTTP 503, two failed (as an endpoint's
    refusals leave them; the engine's own transitions are not the point here)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE reminders_occurrence SET attempts = 2, last_error = 'HTTP 503 from the endpoint',"
            " next_attempt_at = now() + interval '5 minutes' WHERE id IN (SELECT id FROM reminders_occurrence"
            " WHERE status = 'scheduled' ORDER BY fire_at DESC LIMIT 3)"
        )
        cursor.execute(
            "UPDATE reminders_occurrence SET status = 'failed', attempts = 5, finished_at = now(),"
            " last_error = 'HTTP 500 from the endpoint' WHERE id IN (SELECT id FROM reminders_occurrence"
            " WHERE status = 'scheduled' AND attempts = 0 ORDER BY fire_at DESC LIMIT 2)"
        )


def _grow(h: Harness) -> None:
    """Ten times the demo team: more players with a device each, reminded and sent again."""
    from delivery import models as dm
    from trainings import models as tm

    team = tm.Team.objects.get(name="Demo U15")
    players = tm.Player.objects.bulk_create(
        [tm.Player(name=f"Grown {i}", language="en", time_zone="Europe/Paris") for i in range(GROWN_PLAYERS)]
    )
    tm.Membership.objects.bulk_create([tm.Membership(team=team, player=p) for p in players])
    dm.Device.objects.bulk_create(
        [dm.Device(player=p, provider="fcm", platform="android", token=f"grown-{p.pk}") for p in players]
    )
    for training in tm.Training.objects.filter(team=team):
        tm.Invitation.objects.bulk_create(
            [tm.Invitation(training=training, player=p) for p in players], ignore_conflicts=True
        )
    _remind_and_send(h, "grown")


def _pages(operator: Any, coach: Any) -> list[tuple[str, str, Any]]:
    """(who, what, path) of every page: the operator's custom pages, every registered model's list and
    the change page of its newest row, for the operator and for the coach wherever the coach may look."""
    from django.contrib import admin
    from django.urls import reverse

    from trainings import models as tm

    pages: list[tuple[str, str, Any]] = [
        ("operator", "home", "/admin/"),
        ("operator", "status page", reverse("admin-status")),
        ("operator", "dead letters", reverse("admin-dead-letters")),
        ("operator", "occurrences retrying", "/admin/reminders/occurrence/?state=retrying"),
        ("operator", "occurrences failed", "/admin/reminders/occurrence/?status__exact=failed"),
        ("operator", "occurrences upcoming", "/admin/reminders/occurrence/?state=upcoming"),
        ("coach", "home", "/admin/"),
    ]
    for model, _model_admin in sorted(admin.site._registry.items(), key=lambda m: m[0]._meta.label):
        meta = model._meta
        label = str(meta.verbose_name_plural)
        if meta.app_label in ("auth", "authtoken", "axes", "django_celery_beat"):
            continue  # Django's and the libraries' own pages; auth groups is the alternative
        listing = reverse(f"admin:{meta.app_label}_{meta.model_name}_changelist")
        newest = model._default_manager.order_by("-pk").first()
        change = (
            reverse(f"admin:{meta.app_label}_{meta.model_name}_change", args=[newest.pk]) if newest else None
        )
        for who in ("operator", "coach"):
            pages.append((who, f"{label} list", listing))
            if change:
                pages.append((who, f"{meta.verbose_name} page", change))
    for training in tm.Training.objects.filter(team__name="Demo U15").order_by("start"):
        detail = reverse("admin:trainings_training_change", args=[training.pk])
        pages.append(("coach", f"training {training.title!r} (player grid)", detail))
        pages.append(("coach", f"training {training.title!r} history", f"{detail}history/"))
    return pages


def _timed(client: Any, path: str) -> tuple[float, float, int, int, str]:
    """(ms, CPU ms of this process, statements, status, redirect target) of one GET."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as queries:
        cpu, started = time.process_time(), time.perf_counter()
        response = client.get(path)
        elapsed, cpu = (time.perf_counter() - started) * 1000, (time.process_time() - cpu) * 1000
    return elapsed, cpu, len(queries.captured_queries), response.status_code, response.get("Location", "")


def run(h: Harness) -> Section:
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.test import Client

    section = Section("admin")
    rounds = 3 if h.quick else 7
    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "testserver"]
    _demo(h)
    coach_user = get_user_model().objects.get(username="coach")
    operator_user = get_user_model().objects.create_superuser("bench-operator", "op@example.com", "x")
    clients = {"coach": Client(), "operator": Client()}
    clients["coach"].force_login(coach_user)
    clients["operator"].force_login(operator_user)
    pages = _pages(operator_user, coach_user)
    baseline = ("operator", "Django's own admin list: auth groups", "/admin/auth/group/")

    # Warm every page once; keep those the person may open (a coach gets 403 on operators' pages).
    shown: list[tuple[str, str, str]] = []
    for who, what, path in [baseline, *pages]:
        _, _, _, status, location = _timed(clients[who], path)
        if status == 302 and location.startswith(path.split("?")[0]):  # a list's default filter
            path = location
            _, _, _, status, _ = _timed(clients[who], path)
        if status == 200:
            shown.append((who, what, path))
        elif who == "operator":
            raise RuntimeError(f"{path} answered {status} to the operator")
    timings: dict[tuple[str, str, str], list[float]] = {page: [] for page in shown}
    cpu: dict[tuple[str, str, str], list[float]] = {page: [] for page in shown}
    statements: dict[tuple[str, str, str], int] = {}
    for _ in range(rounds):
        for page in shown:
            elapsed, used, count, _, _ = _timed(clients[page[0]], page[2])
            timings[page].append(elapsed)
            cpu[page].append(used)
            statements[page] = count
    _grow(h)
    grown = {page: _timed(clients[page[0]], page[2])[2] for page in shown}

    floor = statistics.median(timings[baseline])
    for page in shown:
        who, what, _ = page
        median, used = statistics.median(timings[page]), statistics.median(cpu[page])
        count, count_grown = statements[page], grown[page]
        flat = "flat" if count_grown <= count + 1 else f"{count_grown} at 10x players: N+1?"
        what = f"{what} (CPU {used:.0f} ms"
        if page == baseline:
            section.rows.append(
                Row(
                    f"12 {who}: {what}, {count} statements)",
                    median,
                    unit="ms",
                    note="the alternative of every row below",
                )
            )
            continue
        section.rows.append(
            Row(
                f"12 {who}: {what}, {count} statements, {flat})",
                median,
                floor,
                "Django's auth group list",
                "ms",
                median / floor if floor else None,
                "of Django's list",
                "≤ 300 ms",
                passed=median <= TARGET_MS,
            )
        )
    section.data = {
        "pages": [
            {"who": page[0], "what": page[1], "path": page[2], "ms": timings[page], "cpu_ms": cpu[page],
             "statements": statements[page], "statements_grown": grown[page]}
            for page in shown
        ],
        "rounds": rounds,
    }  # fmt: skip
    return section
