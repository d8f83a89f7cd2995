"""A new team starts with quiet hours 22:00-07:00 (team-local, changeable, off when both are emptied), so a
21:30 training's post-training questionnaire reminders do not buzz phones in the night; the demo team keeps
quiet hours off so the demo works at any hour."""

from __future__ import annotations

import datetime as dt
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command
from django.test import Client

from reminders.models import Occurrence
from reminders.transports import Delivery
from tests.clients import logged_in
from tests.factories import MembershipFactory, PlayerFactory, UserFactory
from trainings.models import Push, PushStatus, ReminderRule, Team
from trainings.planning.scheduling import HANDLER_NAME
from trainings.planning.writes import training_create
from trainings.reminding.firing import reminder_fire
from trainings.selectors import job_key

pytestmark = pytest.mark.django_db


@pytest.fixture
def operator(db: None) -> Client:
    return logged_in(UserFactory(username="root", is_staff=True, is_superuser=True))


def _team_added(client: Client, **changes: str) -> Team:
    """A team added in the admin as a browser posts the add form, with `changes` typed in."""
    page = client.get("/admin/trainings/team/add/")
    form = page.context["adminform"].form
    data: dict[str, Any] = {}
    for name in form.fields:
        value = form[name].value()
        if value not in (None, False, [], ""):
            data[name] = value
    for inline in page.context["inline_admin_formsets"]:
        data |= {inline.formset.management_form.add_prefix(k): v
                 for k, v in inline.formset.management_form.initial.items()}  # fmt: skip
    typed = {**data, "name": "U13 Lyon", "time_zone": "Europe/Paris", **changes}
    response = client.post("/admin/trainings/team/add/", typed)
    assert response.status_code == 302, response.content.decode()[:3000]
    return Team.objects.get(name="U13 Lyon")


def test_a_team_added_in_the_admin_has_quiet_hours_from_22_to_7(operator: Client) -> None:
    page = operator.get("/admin/trainings/team/add/").content.decode()
    assert 'name="quiet_start" value="22:00' in page and 'name="quiet_end" value="07:00' in page

    team = _team_added(operator)

    assert (team.quiet_start, team.quiet_end) == (dt.time(22), dt.time(7))


def test_a_teams_quiet_hours_can_be_changed_or_switched_off(operator: Client) -> None:
    assert _team_added(operator, quiet_start="21:00", quiet_end="06:30").quiet_start == dt.time(21)
    Team.objects.all().delete()

    team = _team_added(operator, quiet_start="", quiet_end="")

    assert (team.quiet_start, team.quiet_end) == (None, None)


def test_a_late_trainings_post_questionnaire_reminder_waits_for_the_morning(
    rules: dict[str, ReminderRule], push_queue: str
) -> None:
    team = Team.objects.create(name="Seniors", time_zone="Europe/Paris")  # the model's default window
    MembershipFactory(team=team, player=PlayerFactory(name="Ines", time_zone="Europe/Paris"))
    start = dt.datetime(2030, 6, 11, 19, 30, tzinfo=dt.UTC)  # 21:30 in Paris
    training = training_create(team=team, title="Late session", start=start,
                               end=start + dt.timedelta(hours=1), time_zone="Europe/Paris")  # fmt: skip
    rule = rules["post-questionnaire"]
    at = training.end + dt.timedelta(minutes=15)  # 22:45 in Paris
    occurrence = Occurrence.objects.get(job__key=job_key(training_id=training.pk, rule=rule), fire_at=at)

    payload = {"training": str(training.pk), "rule": rule.pk}
    reminder_fire(delivery=Delivery(occurrence.pk, occurrence.idempotency_key, occurrence.job.key, at, 1,
                                    HANDLER_NAME, payload))  # fmt: skip

    (push,) = Push.objects.all()
    assert push.status in (PushStatus.HELD, PushStatus.SKIPPED) and push.sent_at is None
    assert "quiet hours" in push.status_reason


def test_the_demo_team_has_no_quiet_hours(settings: Any) -> None:
    settings.DEBUG = True

    call_command("demo_trainings", stdout=StringIO())

    team = Team.objects.get(name="Demo U15")
    assert (team.quiet_start, team.quiet_end) == (None, None)
