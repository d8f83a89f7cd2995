"""A coach and an operator use the admin in a real browser (Chromium via Playwright) against a live server."""

from __future__ import annotations

import datetime as dt
from typing import Any
from urllib.parse import urlsplit
from zoneinfo import ZoneInfo

import pytest
from django.utils import timezone

from reminders.engine.dispatch import ScanResult
from reminders.models import OccurrenceStatus
from reminders.ops.figures import scan_record
from tests.browser.conftest import fits_without_sideways_scroll, log_in, shot
from tests.factories import MembershipFactory, OccurrenceFactory, PlayerFactory, TeamFactory, UserFactory
from trainings.access import coach_group_ensure
from trainings.models import InvitationStatus, Push, PushStatus, ReminderRule, ReminderTemplate
from trainings.planning.defaults import rules_seed
from trainings.planning.writes import invitation_respond, training_create

pytestmark = [pytest.mark.postgres, pytest.mark.rabbitmq, pytest.mark.django_db(transaction=True)]

PARIS = ZoneInfo("Europe/Paris")


@pytest.fixture
def coach_training(settings: Any, queue_name: str) -> Any:
    """A Paris team's training tomorrow at 17:25 Paris time: Alice accepted, Bruno and Chloe pending."""
    settings.TRAININGS_PUSH_QUEUE = queue_name
    rules_seed(ReminderRule, ReminderTemplate)  # a transactional test starts from empty tables
    coach = UserFactory(username="coach", is_staff=True)
    coach.groups.add(coach_group_ensure())
    team = TeamFactory(name="U15 Paris", time_zone="Europe/Paris", coaches=[coach])
    for name in ("Alice", "Bruno", "Chloe"):
        MembershipFactory(team=team, player=PlayerFactory(name=name, time_zone="Europe/Paris"))
    day = (timezone.now().astimezone(PARIS) + dt.timedelta(days=1)).date()
    start = dt.datetime.combine(day, dt.time(17, 25), tzinfo=PARIS)
    training = training_create(
        team=team, title="Sprint drills", start=start, end=start + dt.timedelta(minutes=90),
        time_zone="Europe/Paris", location="Stade Charléty",
    )  # fmt: skip
    invitation_respond(
        invitation=training.invitations.get(player__name="Alice"), status=InvitationStatus.ACCEPTED
    )
    return training


def test_a_coach_sees_local_times_and_pending_players_and_reminds_them(
    page: Any, live_server: Any, coach_training: Any
) -> None:
    log_in(page, live_server.url, "coach")
    page.goto(f"{live_server.url}/admin/trainings/training/")
    row = page.locator("#result_list tbody tr", has_text="Sprint drills")
    start = coach_training.start.astimezone(PARIS)
    assert f"{start:%Y-%m-%d}\n17:25:00 {start.tzname()}" in row.inner_text()  # Paris time, zone shown
    assert "Europe/Paris" in row.inner_text()
    assert "1 ✓" in row.inner_text() and "2 pending" in row.inner_text()
    assert fits_without_sideways_scroll(page)
    shot(page, "coach-training-list")

    row.locator("th a, td a").first.click()
    page.wait_for_selector("text=Player grid")
    grid = page.locator("table.player-grid")
    assert "Bruno" in grid.inner_text() and "Pending" in grid.inner_text()
    assert str(coach_training.pk) not in grid.inner_text()
    # The browser runs in UTC, the admin in Paris: Django's offset note would be wrong under training times.
    assert page.locator(".field-start .timezonewarning").count() > 0
    assert not page.locator(".field-start .timezonewarning").first.is_visible()
    assert "training's zone" in page.locator(".field-start").inner_text()
    invitation_rule = ReminderRule.objects.get(slug="invitation")
    page.select_option("#remind-form select[name=rule]", value=str(invitation_rule.pk))
    page.click("#remind-form button")
    page.wait_for_selector(".messagelist")
    assert "Invitation: queued for 2 player(s) (Bruno, Chloe)" in page.inner_text(".messagelist")
    assert "queued for" in page.locator("table.player-grid").inner_text()  # no gateway ran: not reached
    pushes = Push.objects.filter(training=coach_training)
    assert sorted(pushes.values_list("player__name", flat=True)) == ["Bruno", "Chloe"]
    assert set(pushes.values_list("status", flat=True)) == {PushStatus.SENT}
    shot(page, "coach-training-page")


def test_a_coach_invites_a_player_found_by_typing_in_the_row_search_box(
    page: Any, live_server: Any, coach_training: Any
) -> None:
    coach = coach_training.team.coaches.get()
    second = TeamFactory(name="U17 Paris", time_zone="Europe/Paris", coaches=[coach])
    for name in ("Dora", "Denis", "Emile"):
        MembershipFactory(team=second, player=PlayerFactory(name=name, time_zone="Europe/Paris"))
    stranger = TeamFactory(name="Seniors Lyon", coaches=[UserFactory(username="other", is_staff=True)])
    MembershipFactory(team=stranger, player=PlayerFactory(name="Doriane"))

    log_in(page, live_server.url, "coach")
    page.goto(f"{live_server.url}/admin/trainings/training/{coach_training.pk}/change/")
    assert "Dora" not in page.content()  # no row lists the club's players
    page.click("#invitations-group .add-row a")
    row = page.locator("#invitations-group tr.dynamic-invitations").last
    row.locator(".select2-selection").click()
    page.fill(".select2-container--open .select2-search__field", "Dor")
    # The box first lists what the empty search found; wait for the answer to "Dor" to replace it.
    page.wait_for_function(
        """() => {
            const shown = [...document.querySelectorAll(".select2-results__option")].map(o => o.innerText);
            return shown.length > 0 && shown.every(text => text.includes("Dor"));
        }"""
    )
    offered = page.locator(".select2-results__option").all_inner_texts()
    assert offered == ["Dora"], offered  # not another coach's Doriane
    shot(page, "coach-invites-by-search")
    page.click(".select2-results__option:has-text('Dora')")
    page.click("input[name=_continue]")
    page.wait_for_selector(".messagelist")
    assert coach_training.invitations.filter(player__name="Dora").exists()
    assert page.locator("#invitations-group").inner_text().count("Dora") >= 1


def test_an_operator_reads_the_backlog_and_lateness_the_test_created(page: Any, live_server: Any) -> None:
    UserFactory(username="operator", is_staff=True, is_superuser=True)
    now = timezone.now()
    for minutes in (4, 3, 2, 1, 1):  # five due and not delivered, the oldest 4 minutes
        due = now - dt.timedelta(minutes=minutes)
        OccurrenceFactory(fire_at=due, next_attempt_at=due)
    for late_ms in (5, 15, 25, 35, 45):  # delivered a minute ago: p50 25 ms
        fire = now - dt.timedelta(minutes=1)
        delivered = fire + dt.timedelta(milliseconds=late_ms)
        OccurrenceFactory(
            status=OccurrenceStatus.DELIVERED, fire_at=fire, next_attempt_at=fire, delivered_at=delivered,
            finished_at=delivered, attempts=1,
        )  # fmt: skip
    OccurrenceFactory(
        status=OccurrenceStatus.FAILED, finished_at=now, last_error="HTTP 503 from the endpoint"
    )
    # What the scans recorded over the last hour (the chart), less its oldest minute: a minute boundary
    # crossed between here and the page's render then moves no bar out of the page's 60-minute window.
    for minutes in range(59):
        delivered = 600 + 400 * ((minutes * 7) % 5) if minutes % 13 else 0
        scan_record(
            result=ScanResult(claimed=delivered, delivered=delivered, failed=3 if minutes == 20 else 0),
            worker="worker@ci",
            at=now - dt.timedelta(minutes=minutes),
        )

    log_in(page, live_server.url, "operator")
    page.click("text=Scheduler status")  # linked from the admin index
    page.wait_for_selector("#backlog")
    assert page.inner_text("[data-figure=due]") == "5"
    assert page.inner_text("[data-figure=oldest-age]").startswith("4 min")
    last5 = page.locator("tr[data-window='last 5 min']")
    assert last5.locator("[data-figure=p50]").inner_text() == "25 ms"
    assert last5.locator("[data-figure=p99]").inner_text() == "45 ms"
    assert "HTTP 503 from the endpoint" in page.inner_text("#failures")
    assert page.locator("svg.chart rect.delivered").count() == 54  # a bar for each minute with deliveries
    assert page.locator("svg.chart rect.failed").count() == 1
    assert "worker@ci" in page.inner_text("[data-figure=last-scan]")
    shot(page, "operator-status")
    page.goto(f"{live_server.url}/admin/reminders/occurrence/?state=all")
    assert "retrying" not in page.inner_text("#result_list") and "25 ms" in page.inner_text("#result_list")
    assert fits_without_sideways_scroll(page)
    shot(page, "operator-occurrences")


def test_the_api_docs_render_their_operations_without_leaving_the_machine(
    page: Any, live_server: Any
) -> None:
    UserFactory(username="operator", is_staff=True, is_superuser=True)
    requested: list[str] = []
    page.on("request", lambda request: requested.append(request.url))
    log_in(page, live_server.url, "operator")
    page.goto(f"{live_server.url}/api/docs/")
    page.wait_for_selector(".opblock", timeout=30_000)
    assert page.locator(".opblock").count() > 10
    shot(page, "api-docs")
    hosts = {urlsplit(url).hostname for url in requested if not url.startswith(("data:", "blob:"))}
    assert hosts == {"127.0.0.1"}, requested
