"""A reminder rule's offsets in the admin are typed as the experiment form takes them, "90m, 75m, 15m",
not as a JSON list: shown that way, saved as the list, a bad item named, nothing saved then."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.messages import get_messages
from django.test import Client

from trainings.models import ReminderRule

pytestmark = pytest.mark.django_db


def _rule_form(rule: ReminderRule, **changes: str) -> dict[str, Any]:
    templates = list(rule.templates.order_by("id"))
    form: dict[str, Any] = {
        "kind": rule.kind, "offsets": ", ".join(rule.offsets), "active": "on", "critical_offsets": "",
        "templates-TOTAL_FORMS": len(templates), "templates-INITIAL_FORMS": len(templates),
        "templates-MIN_NUM_FORMS": 0, "templates-MAX_NUM_FORMS": 1000,
    }  # fmt: skip
    for index, template in enumerate(templates):
        form |= {f"templates-{index}-{name}": value for name, value in (
            ("id", template.pk), ("rule", rule.pk), ("language", template.language),
            ("title", template.title), ("body", template.body))}  # fmt: skip
    return form | changes


def test_it_shows_a_rules_offsets_as_typed_text(admin_client: Client) -> None:
    rule = ReminderRule.objects.get(slug="pre-questionnaire")

    page = admin_client.get(f"/admin/trainings/reminderrule/{rule.pk}/change/").content.decode()

    assert 'value="90m, 75m, 60m, 45m, 30m, 15m"' in page
    assert '<textarea name="offsets"' not in page and "[&quot;90m&quot;" not in page


def test_it_saves_typed_offsets_and_critical_ones_as_lists(admin_client: Client) -> None:
    rule = ReminderRule.objects.get(slug="pre-questionnaire")
    path = f"/admin/trainings/reminderrule/{rule.pk}/change/"

    response = admin_client.post(path, _rule_form(rule, offsets="90m, 75m, 15m", critical_offsets="15m"))

    assert response.status_code == 302, response.content.decode()[:2000]
    rule.refresh_from_db()
    assert (rule.offsets, rule.critical_offsets) == (["90m", "75m", "15m"], ["15m"])
    assert admin_client.post(path, _rule_form(rule, critical_offsets="all")).status_code == 302
    rule.refresh_from_db()
    assert rule.critical_offsets == "all"


def test_it_names_a_bad_offset_and_saves_nothing(admin_client: Client) -> None:
    rule = ReminderRule.objects.get(slug="pre-questionnaire")

    response = admin_client.post(
        f"/admin/trainings/reminderrule/{rule.pk}/change/", _rule_form(rule, offsets="90m, soon, 15m")
    )

    assert response.status_code == 200
    assert "'soon' is not an offset" in response.context["adminform"].form.errors["offsets"][0]
    assert 'value="90m, soon, 15m"' in response.content.decode()  # the box keeps what was typed
    rule.refresh_from_db()
    assert rule.offsets == ["90m", "75m", "60m", "45m", "30m", "15m"]


def test_saving_unchanged_offsets_reschedules_nothing(admin_client: Client) -> None:
    rule = ReminderRule.objects.get(slug="pre-questionnaire")

    response = admin_client.post(f"/admin/trainings/reminderrule/{rule.pk}/change/", _rule_form(rule))

    assert response.status_code == 302
    assert not [m for m in get_messages(response.wsgi_request) if "rescheduled" in str(m)]
