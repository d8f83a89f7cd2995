"""The table, the JSON file and the PNG chart of one run."""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class Row:
    """One line of the table: this project's figure beside the alternative measured in the same run.

    `ratio` is oriented so that the target reads naturally (e.g. beat p99 / our p99 for "20x better").
    `passed` is None for rows that only inform.
    """

    scenario: str
    ours: float | None
    alternative: float | None = None
    alternative_label: str = ""
    unit: str = ""
    ratio: float | None = None
    ratio_label: str = ""
    target: str = ""
    passed: bool | None = None
    note: str = ""


@dataclass
class Section:
    name: str
    rows: list[Row] = field(default_factory=list)
    data: dict[str, Any] = field(default_factory=dict)
    skipped: str = ""


@dataclass(frozen=True)
class RoundRatios:
    """Ratios measured round by round, summarised by their median: one slow round on a shared machine moves
    a median far less than it moves a ratio of sums, and the spread says how far the rounds agreed."""

    values: tuple[float, ...]

    @property
    def median(self) -> float:
        ordered = sorted(self.values)
        mid = len(ordered) // 2
        return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2

    def describe(self) -> str:
        rounds = ", ".join(f"{x:.2f}" for x in self.values)
        low, high = min(self.values), max(self.values)
        count = len(self.values)
        return f"median of {count} rounds {self.median:.2f} (spread {low:.2f} to {high:.2f}: {rounds})"


def _fmt(value: float | None, unit: str = "") -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if unit == "s":
        return f"{value:.3f} s" if abs(value) < 10 else f"{value:.1f} s"
    if unit == "ms":
        return f"{value:.2f} ms"
    if unit == "MiB":
        return f"{value:.1f} MiB"
    if abs(value) >= 100:
        return f"{value:,.0f}{(' ' + unit) if unit else ''}"
    return f"{value:.2f}{(' ' + unit) if unit else ''}"


def render_table(sections: list[Section]) -> str:
    header = ("scenario", "this project", "alternative", "ratio", "target", "result")
    lines: list[tuple[str, ...]] = []
    for section in sections:
        if section.skipped:
            lines.append((section.name, "skipped: " + section.skipped, "", "", "", ""))
            continue
        for row in section.rows:
            alternative = _fmt(row.alternative, row.unit)
            if row.alternative_label:
                alternative = (
                    f"{alternative} ({row.alternative_label})" if row.alternative is not None else ""
                )
            ratio = (
                ""
                if row.ratio is None
                else f"{row.ratio:.2f}x" + (f" {row.ratio_label}" if row.ratio_label else "")
            )
            result = "" if row.passed is None else ("pass" if row.passed else "SHORT")
            lines.append((row.scenario, _fmt(row.ours, row.unit), alternative, ratio, row.target, result))
    widths = [max(len(str(line[i])) for line in [header, *lines]) for i in range(len(header))]

    def fmt_line(cells: tuple[str, ...]) -> str:
        return "| " + " | ".join(str(c).ljust(w) for c, w in zip(cells, widths, strict=True)) + " |"

    out = [fmt_line(header), "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    out += [fmt_line(line) for line in lines]
    notes = [f"- {row.scenario}: {row.note}" for s in sections for row in s.rows if row.note]
    if notes:
        out += ["", "Notes:", *notes]
    return "\n".join(out)


def write_json(path: Path, meta: dict[str, Any], sections: list[Section]) -> None:
    document = {
        "meta": meta,
        "sections": [
            {"name": s.name, "skipped": s.skipped, "rows": [asdict(r) for r in s.rows], "data": s.data}
            for s in sections
        ],
    }
    path.write_text(json.dumps(document, indent=2, default=str))


def write_chart(path: Path, sections: list[Section], title: str) -> str:
    """Lateness CDFs, throughput bars, claim cost against table size, worker peak RSS."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "PNG skipped: matplotlib is not installed (pip install -e '.[bench]')"
    by_name = {s.name: s for s in sections if not s.skipped}
    fig, axes = plt.subplots(2, 2, figsize=(13, 9))
    fig.suptitle(title, fontsize=10)

    ax = axes[0][0]
    lateness = by_name.get("lateness")
    if lateness:
        for label, series in lateness.data.get("cdf", {}).items():
            xs = [max(x, 1e-3) for x in series]
            ys = [(i + 1) / len(xs) for i in range(len(xs))]
            ax.plot(xs, ys, label=label)
        ax.set_xscale("log")
        ax.axvline(1.0, color="grey", linestyle=":", linewidth=1)
        ax.legend(fontsize=8)
    ax.set_title("Fire lateness CDF (time on queue - fire time)")
    ax.set_xlabel("seconds (log)")
    ax.set_ylabel("fraction of reminders")

    ax = axes[0][1]
    bars: list[tuple[str, float]] = []
    for name in ("scheduling", "dispatch"):
        section = by_name.get(name)
        if section:
            bars += [(k, v) for k, v in section.data.get("bars", {}).items() if v]
    if bars:
        ax.barh([b[0] for b in bars], [b[1] for b in bars], color="tab:blue")
        for i, (_, value) in enumerate(bars):
            ax.text(value, i, f" {value:,.0f}", va="center", fontsize=7)
        ax.set_xscale("log")
    ax.set_title("Throughput (items/s, log)")
    ax.tick_params(axis="y", labelsize=7)

    ax = axes[1][0]
    claim = by_name.get("claim")
    if claim and claim.data.get("sizes"):
        sizes = claim.data["sizes"]
        ax.plot(sizes, claim.data["median_ms"], marker="o", label="median")
        ax.plot(sizes, claim.data["p90_ms"], marker="x", linestyle="--", label="p90")
        ax.set_xscale("log")
        ax.set_ylim(bottom=0)
        ax.legend(fontsize=8)
    ax.set_title("Claim of 1,000 due rows against future rows in the table")
    ax.set_xlabel("future occurrences (log)")
    ax.set_ylabel("ms per claim")

    ax = axes[1][1]
    memory = by_name.get("memory")
    if memory and memory.data.get("bars"):
        labels, values = zip(*memory.data["bars"].items(), strict=True)
        ax.bar(range(len(values)), values, color="tab:green")
        ax.set_xticks(range(len(values)), labels, rotation=20, ha="right", fontsize=7)
    ax.set_title("Worker peak RSS (MiB)")

    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return f"chart: {path}"
