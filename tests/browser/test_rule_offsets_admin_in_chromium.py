"""A reminder rule's offsets as an operator types them in the admin, "90m, 75m, 15m", like the experiment
form: a one-line box, saved, and shown back the same way. Screenshot: admin-rule-offsets.png."""

from __future__ import annotations

from typing import Any

import pytest

from tests.browser.conftest import log_in, shot
from tests.factories import UserFactory, rules_seeded

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def test_an_operator_types_a_rules_offsets_as_text(page: Any, live_server: Any) -> None:
    rule = rules_seeded()["pre-questionnaire"]
    UserFactory(username="operator", is_staff=True, is_superuser=True)
    log_in(page, live_server.url, "operator")
    page.goto(f"{live_server.url}/admin/trainings/reminderrule/{rule.pk}/change/")
    box = page.locator("input#id_offsets")
    assert box.input_value() == "90m, 75m, 60m, 45m, 30m, 15m"

    box.fill("90m, 75m, 15m")
    page.fill("#id_critical_offsets", "15m")
    page.click("input[name=_continue]")
    page.wait_for_selector(".messagelist")

    assert page.locator("input#id_offsets").input_value() == "90m, 75m, 15m"
    assert page.locator("input#id_critical_offsets").input_value() == "15m"
    rule.refresh_from_db()
    assert (rule.offsets, rule.critical_offsets) == (["90m", "75m", "15m"], ["15m"])
    page.locator("#reminderrule_form").scroll_into_view_if_needed()
    shot(page, "admin-rule-offsets")
