"""6. The trainings path, once the trainings app exists (it is built on another branch).

What it measures: 10,000 trainings x 22 reminders scheduled through the trainings service layer (each
training saved with its reminders in one transaction), occurrences/s; then one due minute's reminders are
made due and drained by the scan loop: each fires the trainings handler, which re-checks who is still
PENDING and publishes one push per remaining player to RabbitMQ; pushes/s (counted on the push queue) and
the share of players skipped because they had answered.

Until the app provides its models and services this section prints "skipped" and the rest of the run is
unaffected. The import is guarded so this file never breaks the benchmark.
"""

from __future__ import annotations

import importlib
import importlib.util

from bench.harness import Harness
from bench.report import Section

# The trainings service entry points this scenario drives; it runs when all of them exist.
REQUIRED = ("trainings.models:Training", "trainings.services:training_create")


def _resolve(spec: str) -> object | None:
    module_name, attr = spec.split(":")
    if importlib.util.find_spec(module_name) is None:
        return None
    return getattr(importlib.import_module(module_name), attr, None)


def run(h: Harness) -> Section:
    section = Section("trainings")
    try:
        present = {spec: _resolve(spec) for spec in REQUIRED}
    except ImportError as exc:
        section.skipped = f"trainings app not importable ({exc})"
        return section
    if present["trainings.models:Training"] is None:
        section.skipped = "trainings app not present"
        return section
    missing = [spec for spec, value in present.items() if value is None]
    section.skipped = (
        "trainings app present but this harness is not wired to its services yet"
        + (f" (missing {', '.join(missing)})" if missing else "")
        + f"; planned: {h.sizes.trainings:,} trainings x 22 reminders, one due minute, pushes/s"
    )
    return section
