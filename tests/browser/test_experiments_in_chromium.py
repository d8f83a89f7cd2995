"""Timing experiments in Chromium, as an operator: start one on the pre-training questionnaire from the
start form, read its results on the experiment's page (a variant built to answer better, 60 players an arm),
switch the confidence, and promote the variant. Screenshots: var/artifacts/browser/experiment-start.png,
experiment-results.png, experiment-promoted.png."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.utils import timezone

from tests.browser.conftest import fits_without_sideways_scroll, log_in, shot
from tests.factories import UserFactory
from tests.trainings.experiment_data import VARIANT, known_training
from trainings.models import Experiment, ReminderRule, ReminderTemplate
from trainings.planning.defaults import rules_seed

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

# 60 players an arm: the rule's answer in time 33 of 60 (55 %), the variant's 51 of 60 (85 %).
BEHAVIOURS = {
    0: ["before"] * 12 + ["second"] * 21 + ["never"] * 20 + ["late"] * 7,
    1: ["before"] * 12 + ["second"] * 39 + ["never"] * 6 + ["late"] * 3,
}


def test_an_operator_starts_reads_and_promotes_an_experiment(live_server: Any, page: Any) -> None:
    rules_seed(ReminderRule, ReminderTemplate)
    UserFactory(username="operator", is_staff=True, is_superuser=True)
    pre = ReminderRule.objects.get(slug="pre-questionnaire")

    log_in(page, live_server.url, "operator")
    page.goto(f"{live_server.url}/admin/trainings/experiment/add/")
    page.select_option("select[name=rule]", value=str(pre.pk))
    page.fill("input[name=name]", "Earlier first reminder")
    page.fill("input[name=variant_1_label]", "120/45/15")
    page.fill("input[name=variant_1_offsets]", "120m, 45m, 15m")
    shot(page, "experiment-start")
    page.click("input[name=_save]")
    page.wait_for_selector("#changelist")
    experiment = Experiment.objects.get()

    # A past training the experiment covered whole (it started two days before it).
    start = (timezone.now() - dt.timedelta(days=1)).replace(microsecond=0)
    Experiment.objects.filter(pk=experiment.pk).update(started_at=start - dt.timedelta(days=1))
    experiment.refresh_from_db()
    known_training(experiment, pre, start, BEHAVIOURS)

    page.click("#result_list a >> text=Earlier first reminder")
    page.wait_for_selector("#experiment-results")
    assert page.inner_text('tr[data-arm="0"] td[data-figure="asked"]') == "60"
    assert page.inner_text('tr[data-arm="0"] td[data-figure="in_time"]') == "33"
    assert page.inner_text('tr[data-arm="1"] td[data-figure="in_time"]') == "51"
    assert page.inner_text('tr[data-arm="1"] td[data-figure="rate"]').startswith("85.0 %")
    assert "Significant at 95%" in page.inner_text('tr[data-arm="1"] td.verdict')
    assert fits_without_sideways_scroll(page)
    shot(page, "experiment-results")

    page.click("a.confidence >> text=99%")
    page.wait_for_selector("a.confidence.chosen >> text=99%")
    assert "at 99%" in page.inner_text('tr[data-arm="1"] td.verdict')

    page.on("dialog", lambda dialog: dialog.accept())
    page.select_option("#promote-form select[name=arm]", value="1")
    page.click("#promote-form button")
    page.wait_for_selector("ul.messagelist")
    assert "Promoted 120/45/15" in page.inner_text("ul.messagelist")
    assert page.locator("#experiment-actions").count() == 0
    pre.refresh_from_db()
    assert pre.offsets == VARIANT and pre.experiment_id is None
    shot(page, "experiment-promoted")
