"""docs/operations/security.md lists every route of the authorization matrix, with its rule and limit."""

from __future__ import annotations

import re
from pathlib import Path

from tests.trainings_faults import test_authorization_matrix as matrix

PAGE = Path(__file__).resolve().parents[2] / "docs" / "operations" / "security.md"
CONSTANTS = {name: value for name, value in vars(matrix).items() if name.isupper()}
RULES = {id(value): name for name, value in CONSTANTS.items() if isinstance(value, matrix.Rule)}
LIMITS = {value: name for name, value in CONSTANTS.items() if isinstance(value, str)}
USED_LIMITS = {LIMITS[limit] for *_, limit in matrix.ROUTES.values()}


def test_the_page_has_a_row_for_every_route_with_its_rule_and_limit() -> None:
    text = PAGE.read_text()
    missing = []
    for (name, method), (owner, rule, limit) in matrix.ROUTES.items():
        cells = f"| {owner} | {RULES[id(rule)]} | {LIMITS[limit]} |"
        if not re.search(re.escape(f"| `{name}` | {method} |") + r"[^\n]*" + re.escape(cells), text):
            missing.append(f"{name} {method}")
    assert missing == [], "regenerate the table of docs/operations/security.md"


def test_the_page_says_what_each_rule_and_limit_means() -> None:
    text = PAGE.read_text()
    for name, value in CONSTANTS.items():
        if isinstance(value, matrix.Rule):
            assert f"- **{name}**: {value.says}" in text
        elif name in USED_LIMITS:
            assert f"- **{name}**: {value}" in text
