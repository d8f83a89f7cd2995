"""The reminder effectiveness page's charts, per rule: the answer rate of each offset (bars: within 15 min,
within 60 min, later) and the time-to-answer curve of each offset (one line each). Inline SVG built like the
status page's chart: no script, no external host."""

from __future__ import annotations

from collections.abc import Sequence

from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from trainings.analytics.figures import OffsetFigures

# One colour per offset, in reminding order (a rule has at most a dozen offsets in practice).
PALETTE = ("#1b5e8c", "#2e7d32", "#b26a00", "#8e24aa", "#c62828", "#00838f", "#6d4c41", "#5c6bc0",
           "#9e9d24", "#ad1457", "#455a64", "#ef6c00")  # fmt: skip


def colour(i: int) -> str:
    return PALETTE[i % len(PALETTE)]


def answer_rate_chart(rows: Sequence[OffsetFigures], *, width: int = 460, height: int = 220) -> SafeString:
    """Per offset, the share of its reached reminders answered: within 15 min, within 60, later."""
    pad_left, pad_bottom, pad_top = 40, 34, 22
    plot_w, plot_h = width - pad_left - 8, height - pad_bottom - pad_top
    slot = plot_w / max(len(rows), 1)
    bar = min(slot * 0.6, 48)
    parts = []
    for i, row in enumerate(rows):
        reached = row.figures.reached
        x = pad_left + i * slot + (slot - bar) / 2
        shares = (
            (row.figures.within_15, "within-15", "within 15 min"),
            (row.figures.within_60 - row.figures.within_15, "within-60", "within 15 to 60 min"),
            (row.figures.answered - row.figures.within_60, "later", "later"),
        )
        base = 0.0
        for count, css, words in shares:
            if reached and count:
                h = plot_h * count / reached
                y = pad_top + plot_h - plot_h * base - h
                parts.append((css, f"{x:.1f}", f"{y:.1f}", f"{bar:.1f}", f"{h:.1f}",
                              f"{row.offset}: {count} of {reached} reached answered {words}"))  # fmt: skip
                base += count / reached
    rects = format_html_join(
        "", '<rect class="{}" x="{}" y="{}" width="{}" height="{}"><title>{}</title></rect>', parts
    )
    labels = format_html_join(
        "",
        '<text x="{}" y="{}" text-anchor="middle">{}</text><text x="{}" y="{}" text-anchor="middle" '
        'class="rate">{}</text>',
        (
            (f"{pad_left + (i + 0.5) * slot:.1f}", height - 18, row.offset,
             f"{pad_left + (i + 0.5) * slot:.1f}", height - 4,
             "—" if row.answer_rate is None else f"{row.answer_rate:.0%}")
            for i, row in enumerate(rows)
        ),
    )  # fmt: skip
    return format_html(
        '<svg class="chart answer-rate" role="img" aria-label="answer rate per offset" width="{w}" '
        'height="{h}" viewBox="0 0 {w} {h}" xmlns="http://www.w3.org/2000/svg">'
        '<g class="legend"><rect class="within-15" x="{l}" y="4" width="10" height="10"/>'
        '<text x="{l1}" y="13">≤ 15 min</text><rect class="within-60" x="{l2}" y="4" width="10" height="10"/>'
        '<text x="{l3}" y="13">≤ 60 min</text><rect class="later" x="{l4}" y="4" width="10" height="10"/>'
        '<text x="{l5}" y="13">later</text></g>'
        '<line x1="{l}" y1="{t}" x2="{l}" y2="{b}" class="axis"/>'
        '<line x1="{l}" y1="{b}" x2="{w}" y2="{b}" class="axis"/>'
        '<text x="{tl}" y="{ty}" text-anchor="end">100%</text>'
        '<text x="{tl}" y="{b}" text-anchor="end">0</text>{rects}{labels}</svg>',
        w=width, h=height, l=pad_left, l1=pad_left + 14, l2=pad_left + 80, l3=pad_left + 94,
        l4=pad_left + 160, l5=pad_left + 174, t=pad_top, b=pad_top + plot_h, tl=pad_left - 4,
        ty=pad_top + 8, rects=rects, labels=labels,
    )  # fmt: skip


def time_to_answer_chart(
    rows: Sequence[OffsetFigures], *, until_minutes: int, width: int = 460, height: int = 220
) -> SafeString:
    """Per offset, the share of its reached reminders answered within t minutes, t up to `until_minutes`."""
    pad_left, pad_bottom, pad_top = 40, 20, 22
    plot_w, plot_h = width - pad_left - 8, height - pad_bottom - pad_top
    lines, legend = [], []
    for i, row in enumerate(rows):
        points = [(0, 0.0)] + [(m, share) for m, share in row.curve() if m <= until_minutes]
        if len(points) < 2:
            continue
        xy = " ".join(
            f"{pad_left + plot_w * m / until_minutes:.1f},{pad_top + plot_h - plot_h * share:.1f}"
            for m, share in points
        )
        final = points[-1][1]
        lines.append(
            (colour(i), xy, f"{row.offset}: {final:.0%} of reached answered within {until_minutes} min")
        )
        legend.append((colour(i), f"{pad_left + 8 + i * 52}", f"{pad_left + 20 + i * 52}", row.offset))
    polylines = format_html_join(
        "", '<polyline class="curve" stroke="{}" points="{}"><title>{}</title></polyline>', lines
    )
    keys = format_html_join(
        "",
        '<rect x="{1}" y="4" width="10" height="10" fill="{0}"/><text x="{2}" y="13">{3}</text>',
        legend,
    )
    ticks = format_html_join(
        "",
        '<line x1="{0}" y1="{1}" x2="{0}" y2="{2}" class="tick"/>'
        '<text x="{0}" y="{3}" text-anchor="middle">{4}</text>',
        (
            (f"{pad_left + plot_w * q / 4:.1f}", pad_top + plot_h, pad_top + plot_h + 4, height - 4,
             f"{until_minutes * q // 4}")
            for q in (1, 2, 3)
        ),
    )  # fmt: skip
    return format_html(
        '<svg class="chart time-to-answer" role="img" aria-label="time to answer per offset" width="{w}" '
        'height="{h}" viewBox="0 0 {w} {h}" xmlns="http://www.w3.org/2000/svg"><g class="legend">{keys}</g>'
        '<line x1="{l}" y1="{t}" x2="{l}" y2="{b}" class="axis"/>'
        '<line x1="{l}" y1="{b}" x2="{w}" y2="{b}" class="axis"/>'
        '<text x="{tl}" y="{ty}" text-anchor="end">100%</text>'
        '<text x="{tl}" y="{b}" text-anchor="end">0</text>'
        '<text x="{l}" y="{hy}">0 min</text><text x="{w}" y="{hy}" text-anchor="end">{until} min</text>'
        "{ticks}{polylines}</svg>",
        w=width, h=height, l=pad_left, t=pad_top, b=pad_top + plot_h, tl=pad_left - 4, ty=pad_top + 8,
        hy=height - 4, until=until_minutes, keys=keys, ticks=ticks, polylines=polylines,
    )  # fmt: skip
