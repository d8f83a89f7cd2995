"""Seed scale (seed 001: 30 M active schedules, 5,000 new ones a minute): claim, memory and lateness.

`python -m bench --only scale` (apart from the full run: filling and vacuuming 30 M rows takes minutes).
The table holds 10 k future occurrences, then 30 M (2 M with --quick). At each size: the claim of 1,000 due
rows (median, with its plan), a fresh worker's peak RSS while it drains a due set, and fire lateness at a
steady rate with real worker and beat processes while a thread creates recurring schedules through
`schedule_upsert` at seed 001's rate. The small size is the comparison: each row is the large size over it.
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench.harness import Harness
from bench.processes import stop_process
from bench.report import Row, Section
from bench.scenarios import lateness, tablesize

SCHEDULES_PER_MINUTE = 5000


@contextlib.contextmanager
def schedules_arriving(h: Harness, tag: str, per_minute: int) -> Iterator[dict[str, Any]]:
    """Create `@every 1h` schedules at `per_minute` from a child process until the block ends.

    Each one is a new key with its first fire an hour away, as a service adopting the scheduler would add
    them: a Job, a Schedule and its next occurrence per call, in one transaction (bench/schedule_load.py).
    """
    stats_path = Path(h.log_dir) / f"{tag}-schedules.json"
    proc = h.start(
        f"{tag}-schedules",
        [sys.executable, "-m", "bench.schedule_load", "--tag", tag, "--per-minute", str(per_minute),
         "--queue", h.queue_name(f"{tag}-sched"), "--stats", str(stats_path)],
    )  # fmt: skip
    stats: dict[str, Any] = {"created": 0, "target_per_minute": per_minute}
    try:
        yield stats
    finally:
        stop_process(proc, grace=30)
        with contextlib.suppress(OSError, ValueError):
            stats.update(json.loads(stats_path.read_text(encoding="utf-8")))
        seconds = stats.get("seconds") or 0.0
        stats["per_minute"] = stats["created"] * 60 / seconds if seconds else 0.0


def _at_size(h: Harness, table: tablesize.FutureTable, size: int) -> dict[str, Any]:
    s = h.sizes
    fill = table.fill_to(size)
    print(f"  table: {size:,} future occurrences (filled and vacuumed in {fill:.1f} s)", flush=True)
    claim = tablesize._claim_cost(h, size, s.claim_reps)
    print(f"    claim of 1,000: median {claim['median_ms']:.2f} ms, p90 {claim['p90_ms']:.2f} ms", flush=True)
    for line in claim["index_lines"]:
        print(f"      plan: {line}", flush=True)
    rss = tablesize._worker_rss(h, size, s.memory_due)
    print(
        f"    worker peak RSS {rss['peak_kib'] / 1024:.1f} MiB ({rss['delivered']:,} delivered)", flush=True
    )
    tag = f"scale-{size}"
    late = lateness.measure_ours(
        h,
        tag,
        rate=s.lateness_rate,
        seconds=s.lateness_seconds,
        during=lambda: schedules_arriving(h, tag, SCHEDULES_PER_MINUTE),
    )
    created = late["during"]
    print(
        f"    lateness @{late['rate']:,}/s: p50 {late['p50'] * 1000:.1f} ms, "
        f"p99 {late['p99'] * 1000:.1f} ms, max {late['max'] * 1000:.1f} ms "
        f"({late['received']:,}/{late['expected']:,}); "
        f"{created['created']:,} schedules created at {created['per_minute']:,.0f}/min",
        flush=True,
    )
    late.pop("cdf", None)
    return {"size": size, "fill_seconds": fill, "claim": claim, "rss": rss, "lateness": late}


def run(h: Harness) -> Section:
    sizes = [10_000, 2_000_000] if h.quick else [10_000, 30_000_000]
    h.truncate_engine()
    table = tablesize.FutureTable(h)
    results = [_at_size(h, table, size) for size in sizes]
    h.truncate_engine()
    small, large = results
    label = f"{large['size'] / 1e6:g} M vs {small['size'] / 1e3:g} k future"
    claim_ratio = large["claim"]["median_ms"] / small["claim"]["median_ms"]
    rss_ratio = large["rss"]["peak_kib"] / small["rss"]["peak_kib"]
    late_l, late_s = large["lateness"], small["lateness"]
    load = f"@{late_l['rate']:,}/s + {SCHEDULES_PER_MINUTE:,} schedules/min"
    section = Section("scale")
    section.rows += [
        Row(
            f"7a claim 1,000 due, {label}",
            large["claim"]["median_ms"],
            small["claim"]["median_ms"],
            f"at {small['size']:,}",
            "ms",
            claim_ratio,
            "large/small",
            "≤ 1.5x",
            claim_ratio <= 1.5,
            note="plan at the large size: " + " / ".join(large["claim"]["index_lines"][:3]),
        ),
        Row(
            f"7b worker peak RSS, {label}",
            large["rss"]["peak_kib"] / 1024,
            small["rss"]["peak_kib"] / 1024,
            f"at {small['size']:,}",
            "MiB",
            rss_ratio,
            "large/small",
            "≤ 1.10x",
            rss_ratio <= 1.10,
        ),
    ]
    during = late_l["during"]
    created = f"received {late_l['received']:,}/{late_l['expected']:,}; schedules created "
    created += f"{during['created']:,} at {during['per_minute']:,.0f}/min"
    for number, stat, limit_ms in (("7c", "p50", 5), ("7d", "p99", 25), ("7e", "max", 100)):
        large_s, small_s = late_l[stat], late_s[stat]
        section.rows.append(
            Row(
                f"{number} lateness {stat} {load}, {label}",
                large_s * 1000,
                small_s * 1000,
                f"at {small['size']:,}",
                "ms",
                large_s / small_s if small_s else None,
                "large/small",
                f"≤ {limit_ms} ms",
                large_s <= limit_ms / 1000,
                note=created if stat == "p50" else "",
            )
        )
    section.data = {"runs": results}
    return section
