"""The quiet-hours page of the docs site, as a coach or operator reads it: the clock-change rules table
and the moved-notice exception are on the page, reachable from the navigation."""

from __future__ import annotations

from typing import Any

from tests.browser.conftest import shot
from tests.browser.test_docs_site_in_chromium import site  # noqa: F401 - the built site, served


def test_the_quiet_hours_page_shows_the_clock_change_rules(page: Any, site: str) -> None:  # noqa: F811
    page.goto(f"{site}/")
    page.locator(".md-nav__link", has_text="Quiet hours, moved and cancelled trainings").first.click()
    page.wait_for_url("**/quiet-hours/")
    assert (
        page.locator("article h1").first.inner_text().startswith("Quiet hours, moved and cancelled trainings")
    )
    table = page.locator("article table").first
    assert "in a repeated hour (clocks go back)" in table.inner_text()
    assert "second" in table.inner_text() and "at the jump itself" in table.inner_text()
    article = page.locator("article").inner_text()
    assert "sent in quiet hours: the training now starts before they end" in article
    shot(page, "docs-quiet-hours")
