"""The documentation site as a reader sees it: built from docs/ by MkDocs (--strict, as `make test` does),
served on loopback, opened in Chromium. Every page in the navigation opens with its title, and the search
finds the page of a setting. The screenshot lands in var/artifacts/browser/docs-site.png."""

from __future__ import annotations

import functools
import http.server
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.browser.conftest import shot

ROOT = Path(__file__).resolve().parents[2]


def _nav_pages(nav: list[Any]) -> Iterator[tuple[str, str]]:
    for entry in nav:
        for title, target in entry.items():
            if isinstance(target, list):
                yield from _nav_pages(target)
            else:
                yield title, target


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    out = tmp_path_factory.mktemp("site")
    mkdocs = [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "--site-dir", str(out)]
    built = subprocess.run(mkdocs, cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert built.returncode == 0, built.stderr
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(out))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_every_page_in_the_navigation_opens_with_its_heading(page: Any, site: str) -> None:
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    pages = list(_nav_pages(config["nav"]))
    assert len(pages) >= 10
    for title, target in pages:
        path = "" if target == "index.md" else target.removesuffix(".md") + "/"
        response = page.goto(f"{site}/{path}")
        assert response is not None and response.status == 200, target
        heading = page.locator("article h1").first.inner_text()
        assert heading.strip(), f"{target} has no heading"
        assert page.locator(".md-nav__link", has_text=title).count() >= 1, f"{title} is not in the navigation"
    page.goto(f"{site}/")
    shot(page, "docs-site")


def test_the_search_finds_the_page_that_names_a_setting(page: Any, site: str) -> None:
    page.goto(f"{site}/")
    page.keyboard.press("/")  # Material's shortcut that opens the search
    page.locator(".md-search__input").press_sequentially("promtool", delay=20)
    results = page.locator(".md-search-result__item")
    results.first.wait_for()
    hrefs = [results.nth(i).locator("a").first.get_attribute("href") or "" for i in range(results.count())]
    assert any("operations/monitoring" in href for href in hrefs), hrefs
    shot(page, "docs-site-search")
