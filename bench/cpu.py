"""CPU seconds of other processes, read from /proc: the benchmark's children (workers with their pool,
gateways), the PostgreSQL backends serving the run's database and the RabbitMQ broker.

Per-push CPU is what a storm costs whatever the machine's load (a busy neighbour stretches wall time, not
the CPU a push takes), so the storm scenario reports it per process.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable
from pathlib import Path

_TICKS = os.sysconf("SC_CLK_TCK")


def process_cpu(pid: int) -> float:
    """User + system CPU seconds of one process (all its threads); 0 once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return 0.0
    # After the command name: state is field 3, utime and stime are fields 14 and 15 (stat(5)).
    return (int(fields[11]) + int(fields[12])) / _TICKS


def children(pid: int) -> list[int]:
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except (FileNotFoundError, ProcessLookupError):
        return []


def named(comm: str) -> list[int]:
    """Processes whose command name is `comm` (e.g. RabbitMQ's `beam.smp`)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "comm").read_text().strip() == comm:
                    found.append(int(entry.name))
            except (FileNotFoundError, ProcessLookupError, PermissionError):
                continue
    return found


class CpuMeter(threading.Thread):
    """Samples the CPU of a changing set of processes until stopped; `used()` is the CPU each group spent.

    `groups` maps a label to a function returning that group's current pids (a worker and its pool
    children; the database's backends, which come and go). A process's first sample is its baseline if it
    was there at the start; one that appears later counts from zero (it was born during the measurement).
    Its last sample stands once it is gone, so a backend that ended between samples loses at most one
    interval.
    """

    def __init__(self, groups: dict[str, Callable[[], Iterable[int]]], *, every: float = 0.2) -> None:
        super().__init__(daemon=True, name="cpu-meter")
        self.groups, self.every = groups, every
        self._first: dict[tuple[str, int], float] = {}
        self._last: dict[tuple[str, int], float] = {}
        self._stop_event = threading.Event()
        self._sample(start=True)

    def _sample(self, *, start: bool = False) -> None:
        for label, pids in self.groups.items():
            for pid in pids():
                cpu = process_cpu(pid)
                if not cpu:
                    continue
                key = (label, pid)
                self._first.setdefault(key, cpu if start else 0.0)
                self._last[key] = cpu

    def run(self) -> None:
        while not self._stop_event.wait(self.every):
            self._sample()

    def stop(self) -> dict[str, float]:
        self._stop_event.set()
        self.join(5)
        self._sample()
        return self.used()

    def used(self) -> dict[str, float]:
        totals = dict.fromkeys(self.groups, 0.0)
        for (label, pid), last in self._last.items():
            totals[label] += last - self._first[(label, pid)]
        return totals
