"""The README is a newcomer's page: short, and every page it links to exists (the docs site itself is
checked by `mkdocs build --strict` in `make test` and opened in Chromium in tests/browser/)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def test_it_is_read_in_five_minutes() -> None:
    assert len(README.splitlines()) <= 250


def test_it_opens_with_the_two_commands() -> None:
    first_block = README.split("```")[1]
    assert "make run" in first_block and "make test" in first_block


def test_every_local_link_names_a_file_that_exists() -> None:
    targets = [t for t in re.findall(r"\]\(([^)#\s]+)", README) if "://" not in t]
    assert targets, "the README links to the documentation pages"
    missing = [t for t in targets if not (ROOT / t).exists()]
    assert not missing
