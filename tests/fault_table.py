"""The README's fault table: each fault scenario records one row once all its assertions passed.

Both suites (tests/faults for the engine, tests/trainings_faults for the trainings path) record here; the
root conftest prints the table at the end of the run and writes it to bench/results/fault-suite.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
RESULTS_PATH = REPO_ROOT / "bench" / "results" / "fault-suite.md"


@dataclass(frozen=True)
class Row:
    scenario: str
    fault: str
    result: str


RESULTS: list[Row] = []


def record(scenario: str, fault: str, result: str) -> None:
    """One line of the table; call it after the scenario's assertions."""
    RESULTS.append(Row(*(text.replace("|", "\\|").replace("\n", " ") for text in (scenario, fault, result))))


def results_table() -> str:
    """Numbered engine scenarios first, in order, then the rest in the order they ran."""
    lines = ["| scenario | fault | result |", "| --- | --- | --- |"]
    rows = sorted(RESULTS, key=lambda r: int(r.scenario.split(".", 1)[0]) if r.scenario[0].isdigit() else 99)
    lines += [f"| {r.scenario} | {r.fault} | {r.result} |" for r in rows]
    return "\n".join(lines) + "\n"
