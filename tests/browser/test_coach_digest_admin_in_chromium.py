"""A coach sets their team's digest times and their own profile in Chromium: the team page's digest
fields reschedule the team's trainings, the coaches' digests list reads what they were told, and the
coach's profile page changes their language (the admin's too). Screenshots:
var/artifacts/browser/coach-team-digest.png, coach-profile.png, coach-digests.png."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.utils import timezone

from reminders.models import Occurrence
from tests.browser.conftest import fits_without_sideways_scroll, log_in, shot
from tests.factories import MembershipFactory, PlayerFactory, TeamFactory, UserFactory, training_made
from trainings.access import coach_group_ensure
from trainings.models import Coach, CoachPush, ReminderRule, ReminderTemplate
from trainings.planning.defaults import rules_seed
from trainings.planning.kinds import coach_kinds
from trainings.selectors import job_key

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def test_a_coach_sets_the_digest_times_and_their_profile(live_server: Any, page: Any) -> None:
    rules_seed(ReminderRule, ReminderTemplate)
    user = UserFactory(username="coach", is_staff=True, first_name="Camille")
    user.groups.add(coach_group_ensure())
    coach = Coach.objects.create(user=user, time_zone="Europe/London")
    team = TeamFactory(name="U15", coaches=[user])
    MembershipFactory(team=team, player=PlayerFactory(name="Anna"))
    start = (timezone.now() + dt.timedelta(days=2)).replace(hour=16, minute=0, second=0, microsecond=0)
    training = training_made(team, start, title="Speed session")
    CoachPush.objects.create(
        key="k", occurrence_key="k", coach=coach, team=team, training=training, kind="DIGEST",
        language="en", title="U15: who still owes what", owing=1, status="sent", fire_at=start,
        body="U15 Speed session 5 p.m.: 1 of 1 still owes the pre-training questionnaire: Anna",
    )  # fmt: skip

    log_in(page, live_server.url, "coach")
    page.goto(f"{live_server.url}/admin/trainings/team/{team.pk}/change/")
    page.fill("#id_digest_before", "2h")
    page.fill("#id_digest_morning_at", "07:00")
    page.fill("#id_decline_alert_within", "3h")
    shot(page, "coach-team-digest")
    page.click("input[name=_save]")
    page.wait_for_selector(".messagelist")
    digest = Occurrence.objects.get(job__key=job_key(training_id=training.pk, rule=ReminderRule.objects.get(
        slug="coach-digest")), status="scheduled")  # fmt: skip
    assert digest.fire_at == start - dt.timedelta(hours=2)

    page.goto(f"{live_server.url}/admin/trainings/team/{team.pk}/change/")
    page.fill("#id_digest_before", "2 hours")
    page.click("input[name=_save]")
    assert "is not an offset" in page.inner_text(".errorlist")  # the field, and why

    page.goto(f"{live_server.url}/admin/trainings/coachpush/")
    assert "U15" in page.inner_text("#result_list")
    kinds = page.locator("#changelist-filter details:has(summary:text-is('By kind')) li").all_inner_texts()
    assert kinds[1:] == [k.label for k in coach_kinds()] and "Invitation" not in kinds, kinds  # coaches' only
    assert fits_without_sideways_scroll(page)
    shot(page, "coach-digests")

    page.goto(f"{live_server.url}/admin/trainings/coach/")
    assert page.locator("#result_list tbody tr").count() == 1  # their own profile only
    page.goto(f"{live_server.url}/admin/trainings/coach/{coach.pk}/change/")
    page.select_option("#id_language", "fr")
    page.select_option("#id_channels", "email")
    shot(page, "coach-profile")
    page.click("input[name=_save]")
    page.wait_for_selector(".messagelist")
    coach.refresh_from_db()
    assert (coach.language, coach.channels) == ("fr", "email")
    assert "Déconnexion" in page.locator("#logout-form").text_content()  # the admin now in their language
