"""The admin is the product's: the login page, the header, the index and the browser tab name Reminders,
never "Django administration" (a coach who logs in sees whose pages these are)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.browser.conftest import log_in, shot
from tests.factories import UserFactory

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def test_the_login_page_the_header_and_the_tab_name_reminders(page: Any, live_server: Any) -> None:
    UserFactory(username="operator", is_staff=True, is_superuser=True)
    page.goto(f"{live_server.url}/admin/login/")
    assert page.title() == "Log in | Reminders"
    assert page.locator("#site-name").inner_text() == "Reminders"
    shot(page, "admin-login-titles")
    log_in(page, live_server.url, "operator")
    assert page.title() == "Teams, trainings and the scheduler | Reminders"
    assert page.locator("#site-name").inner_text() == "Reminders"
    assert page.locator("#content h1").inner_text() == "Teams, trainings and the scheduler"
    assert "Django" not in page.locator("#header").inner_text()
    shot(page, "admin-index-titles")
