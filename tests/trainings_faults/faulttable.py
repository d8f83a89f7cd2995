"""Rows for the README's fault table, written by the scenario tests themselves.

Set `FAULTS_TABLE` to a file path (e.g. `FAULTS_TABLE=bench/results/faults.md`) and each scenario appends
one markdown row `| scenario | fault | result |` with what it measured. Unset, nothing is written: a normal
test run leaves no files behind.
"""

from __future__ import annotations

import os
from pathlib import Path

ENV = "FAULTS_TABLE"


def fault_row(*, scenario: str, fault: str, result: str) -> None:
    """Append one row (cells have their pipes escaped) when FAULTS_TABLE names a file."""
    target = os.environ.get(ENV, "").strip()
    if not target:
        return
    path = Path(target)
    path.parent.mkdir(parents=True, exist_ok=True)
    cells = [text.replace("|", "\\|").replace("\n", " ") for text in (scenario, fault, result)]
    with path.open("a", encoding="utf-8") as out:
        out.write("| " + " | ".join(cells) + " |\n")
