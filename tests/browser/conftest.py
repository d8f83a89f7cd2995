"""Browser tests: Playwright drives Debian's Chromium (/usr/bin/chromium; browsers cannot be downloaded
here) against pytest-django's live server on 127.0.0.1. Without Chromium they skip with a message on a
developer's machine and fail in CI (CI=true), where .ci/run installs it."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from django.conf import settings

CHROMIUM = os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    # No host name but loopback resolves: a page that asks for anything else fails at once (and the `page`
    # fixture fails its test) instead of waiting for this machine's resolver, which can take 5 s to say no.
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1, EXCLUDE localhost",
]
# The live server listens on loopback, on a port the OS picks.
os.environ.setdefault("DJANGO_LIVE_TEST_SERVER_ADDRESS", "127.0.0.1")
# Playwright's sync API runs an event loop in the test's thread; the ORM calls the tests make around it
# are ordinary synchronous ones.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

ARTIFACTS = Path(settings.VAR_DIR) / "artifacts" / "browser"
PASSWORD = "correct horse battery staple"  # tests/factories.py UserFactory


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    if not (os.path.exists(CHROMIUM) and shutil.which(CHROMIUM)):
        message = f"browser tests need Chromium at {CHROMIUM} (apt-get install chromium chromium-driver)"
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(message)
        pytest.skip(message)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    """A page of a fresh context; the test fails if anything it showed asked for a host other than loopback
    (a font, a script or a tracker from a third party: the admin and the docs work offline and tell nobody
    who reads them)."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.set_default_timeout(15_000)
    elsewhere: list[str] = []

    def note(request: Any) -> None:
        if _off_loopback(request.url):
            elsewhere.append(request.url)

    page.on("request", note)
    yield page
    context.close()
    assert not elsewhere, f"the pages asked for hosts other than loopback: {elsewhere}"


def _off_loopback(url: str) -> bool:
    parts = urlsplit(url)
    return parts.scheme in ("http", "https", "ws", "wss") and parts.hostname not in ("127.0.0.1", "localhost")


def shot(page: Any, name: str) -> Path:
    """A full-page screenshot under var/artifacts/browser/ (gitignored; CI keeps it as an artifact)."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


def log_in(page: Any, base_url: str, username: str) -> None:
    page.goto(f"{base_url}/admin/login/?next=/admin/")
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_selector("#site-name")


def fits_without_sideways_scroll(page: Any) -> bool:
    """Neither the page nor the admin's result table scrolls sideways at the viewport's width."""
    return bool(
        page.evaluate(
            """() => {
                const root = document.documentElement;
                const results = document.querySelector('#changelist .results');
                return root.scrollWidth <= root.clientWidth
                    && (!results || results.scrollWidth <= results.clientWidth);
            }"""
        )
    )
