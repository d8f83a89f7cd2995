"""The platform's webhook subscriptions in Chromium, as an operator: the list shows each one's URL, owner,
events and status (active, disabled with the reason), and a disabled one is enabled again with the
action. Screenshot: var/artifacts/browser/webhooks-admin.png."""

from __future__ import annotations

from typing import Any

import pytest
from django.utils import timezone

from tests.browser.conftest import fits_without_sideways_scroll, log_in, shot
from tests.factories import UserFactory
from trainings.models import WebhookSubscription

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def test_an_operator_reads_the_webhooks_status_and_enables_a_disabled_one(
    live_server: Any, page: Any
) -> None:
    UserFactory(username="operator", is_staff=True, is_superuser=True)
    platform = UserFactory(username="club-platform")
    events = ["answer.recorded", "push.outcome"]
    WebhookSubscription.objects.create(
        owner=platform, url="https://platform.example/events", events=events, secret="whsec_x"
    )
    broken = WebhookSubscription.objects.create(
        owner=platform, url="https://old.platform.example/hook", events=["push.outcome"], secret="whsec_y",
        active=False, disabled_at=timezone.now(),
        disabled_reason="every delivery failed for 24 h (since 2030-06-10 08:00 UTC)",
    )  # fmt: skip

    log_in(page, live_server.url, "operator")
    page.goto(f"{live_server.url}/admin/trainings/webhooksubscription/")
    rows = page.inner_text("#result_list")
    assert "https://platform.example/events" in rows and "answer.recorded, push.outcome" in rows
    assert "disabled: every delivery failed for 24 h" in rows and "active" in rows
    assert "whsec_" not in page.content()  # the secret is never shown again
    assert fits_without_sideways_scroll(page)
    shot(page, "webhooks-admin")

    page.check(f"input[name=_selected_action][value='{broken.pk}']")
    page.select_option("select[name=action]", value="enable")
    page.click("button[name=index]")
    page.wait_for_selector("#result_list")
    broken.refresh_from_db()
    assert broken.active and broken.disabled_reason == ""
    assert "disabled:" not in page.inner_text("#result_list")
