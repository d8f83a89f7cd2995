"""An adaptive timing experiment's page in Chromium, as an operator: three arms, a simulated history of
daily trainings (40 players; 40 %, 55 % and 45 % answer in time), the probabilities now and their charts
over time, ended by the stopping rule. The screenshot is docs/operations/adaptive-timing.md's picture: with
DOCS_SCREENSHOTS=1 it is written to docs/operations/adaptive-timing.png (refresh it:
`DOCS_SCREENSHOTS=1 .venv/bin/pytest tests/browser/test_adaptive_experiment_in_chromium.py`, on
PostgreSQL), otherwise to var/artifacts/browser/adaptive-timing.png."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from tests.browser.conftest import ARTIFACTS, fits_without_sideways_scroll, log_in
from tests.factories import UserFactory
from tests.trainings.adaptive_data import simulated
from trainings.experiments.control import experiment_start
from trainings.models import Experiment, ExperimentStatus, ReminderRule, ReminderTemplate
from trainings.planning.defaults import rules_seed
from trainings.planning.scheduling import rule_reschedule_batch

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

DOCS = Path(__file__).resolve().parents[2] / "docs" / "operations"


def test_an_operator_reads_an_adaptive_experiment(live_server: Any, page: Any) -> None:
    rules_seed(ReminderRule, ReminderTemplate)
    UserFactory(username="operator", is_staff=True, is_superuser=True)
    pre = ReminderRule.objects.get(slug="pre-questionnaire")
    experiment = experiment_start(
        rule=pre,
        name="Tune the pre-training reminders",
        variants=[("120/45/15", ["120m", "45m", "15m"]), ("60/30/15", ["60m", "30m", "15m"])],
        mode="adaptive",
    )
    rule_reschedule_batch(rule_id=pre.pk)
    pre.refresh_from_db()
    simulated(experiment, pre, {0: 0.40, 1: 0.55, 2: 0.45}, players=40, trainings=30, seed=7)
    experiment = Experiment.objects.get(pk=experiment.pk)
    assert experiment.status == ExperimentStatus.PROMOTED and experiment.promoted is not None
    assert experiment.promoted.arm == 1

    log_in(page, live_server.url, "operator")
    page.goto(f"{live_server.url}/admin/trainings/experiment/{experiment.pk}/change/")
    page.wait_for_selector("#adaptive")
    assert page.locator("#adaptive svg.chart.adaptive").count() == 2
    assert "Leading: 120/45/15" in page.inner_text("#adaptive-verdict")
    assert "The stopping rule is met." in page.inner_text("#adaptive-verdict")
    assert fits_without_sideways_scroll(page)
    folder = DOCS if os.environ.get("DOCS_SCREENSHOTS") == "1" else ARTIFACTS
    folder.mkdir(parents=True, exist_ok=True)
    page.locator("#adaptive").scroll_into_view_if_needed()
    page.screenshot(path=str(folder / "adaptive-timing.png"), full_page=True)
