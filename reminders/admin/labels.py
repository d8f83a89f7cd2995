"""What a person reads instead of an engine key: an app that owns jobs (trainings) registers a describer
that names them ("Sprint drills · U15 Paris · Pre-training questionnaire"); the engine's admin pages ask
it once per page for every job shown. Jobs no describer knows keep their key.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

# Each describer maps job ids to a label; it answers for the ids it knows and leaves the others out.
Describer = Callable[[list[int]], dict[int, str]]
_describers: list[Describer] = []


def job_describer_register(describer: Describer) -> None:
    """Called once by an app's admin module at import."""
    if describer not in _describers:
        _describers.append(describer)


def job_labels(job_ids: Iterable[int]) -> dict[int, str]:
    """Labels for these jobs, one query per describer however many jobs there are."""
    ids = sorted(set(job_ids))
    labels: dict[int, str] = {}
    for describer in _describers:
        missing = [i for i in ids if i not in labels]
        if not missing:
            break
        labels.update(describer(missing))
    return labels
