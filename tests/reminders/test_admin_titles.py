"""Every admin page names the product: "Reminders" in the header and the tab, never Django's own name."""

from __future__ import annotations

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db


def test_it_names_reminders_on_the_login_page_and_the_index(operator: Client) -> None:
    login = Client().get("/admin/login/").content.decode()
    assert "<title>Log in | Reminders</title>" in login and "Django administration" not in login
    assert '<a href="/admin/">Reminders</a>' in login
    index = operator.get("/admin/").content.decode()
    assert "<title>Teams, trainings and the scheduler | Reminders</title>" in index
    assert '<a href="/admin/">Reminders</a>' in index
    assert "Django administration" not in index and "Site administration" not in index
