"""What the machine gave a run: its cores' busy and idle time, and how fast it ran plain Python.

The suite's wall time is judged against a target on a shared 2-core machine whose speed varies from day
to day (and minute to minute) with its neighbours. The run's summary says how busy the cores were and how
long a fixed Python loop took when the run started, so a slower run can be told apart from a slower
machine (docs/development.md, "Where the time goes").
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

STAT = Path("/proc/stat")
LOOP = 2_000_000


@dataclass(frozen=True)
class CpuTimes:
    busy: float  # seconds, all cores
    idle: float

    @classmethod
    def now(cls) -> CpuTimes | None:
        """The kernel's counters since boot (Linux), or None where there is no /proc/stat."""
        try:
            fields = [int(value) for value in STAT.read_text().split("\n", 1)[0].split()[1:]]
        except (OSError, ValueError):
            return None
        ticks = 100.0  # USER_HZ, 100 on every Linux this runs on
        user, nice, system, idle, iowait, irq, softirq = fields[:7]
        return cls((user + nice + system + irq + softirq) / ticks, (idle + iowait) / ticks)


def loop_nanoseconds() -> float:
    """Nanoseconds per iteration of a plain loop in a function: the larger, the slower or busier the
    machine (docs/development.md gives the figures of the runs it reports)."""

    def spin() -> int:
        total = 0
        for i in range(LOOP):
            total += i
        return total

    start = time.perf_counter()
    spin()
    return (time.perf_counter() - start) / LOOP * 1e9


def summary(start: CpuTimes | None, loop_ns: float) -> str:
    end = CpuTimes.now()
    speed = f"a plain Python loop at the start: {loop_ns:.0f} ns an iteration"
    if start is None or end is None:
        return f"machine: {speed}"
    busy, idle = end.busy - start.busy, end.idle - start.idle
    share = busy / (busy + idle) if busy + idle else 0.0
    cores = f"cores busy {busy:,.0f} s and idle {idle:,.0f} s during the run ({share:.0%} busy)"
    return f"machine: {cores}; {speed}"
