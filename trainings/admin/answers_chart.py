"""The effectiveness page's answers charts: per scale question of a team's questionnaires, each player's
answers over the period (one thin line each, a dot per training) and the team's mean (the thick line).
Inline SVG like the page's other charts: no script, no external host."""

from __future__ import annotations

from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from trainings.admin.analytics_charts import colour
from trainings.analytics.answers import Series


def answers_chart(series: Series, *, width: int = 560, height: int = 220) -> SafeString:
    """One question's answers: x the trainings in order (their local day below), y the question's scale."""
    question = series.question
    low, high = question.minimum or 0, question.maximum or 1
    pad_left, pad_right, pad_top, pad_bottom = 34, 10, 12, 34
    plot_w, plot_h = width - pad_left - pad_right, height - pad_top - pad_bottom
    count = max(len(series.days), 1)

    def x(index: int) -> float:
        return pad_left + (plot_w * (index + 0.5) / count)

    def y(value: float) -> float:
        return pad_top + plot_h - plot_h * (value - low) / (high - low)

    lines = []
    for i, (player, points) in enumerate(sorted(series.players.items())):
        xy = " ".join(f"{x(index):.1f},{y(value):.1f}" for index, value in points)
        dot = '<circle cx="{}" cy="{}" r="2.5" fill="{}"><title>{}</title></circle>'
        dots = format_html_join("", dot, (
            (f"{x(index):.1f}", f"{y(value):.1f}", colour(i), f"{player}, {series.days[index]}: {value}")
            for index, value in points))  # fmt: skip
        line = '<g class="player" data-player="{}"><polyline class="answers-line" stroke="{}" points="{}"/>'
        line += "{}</g>"
        lines.append(format_html(line, player, colour(i), xy, dots))
    mean = series.mean()
    mean_xy = " ".join(f"{x(index):.1f},{y(value):.1f}" for index, value in mean)
    ticks = format_html_join("", '<text x="{}" y="{}" text-anchor="end">{}</text>', (
        (pad_left - 4, f"{y(v) + 4:.1f}", v) for v in _ticks(low, high)))  # fmt: skip
    every = max(1, len(series.days) // 8)  # at most about eight days written under the axis
    shown = [
        (f"{x(i):.1f}", height - 18, f"{day:%d %b}") for i, day in enumerate(series.days) if i % every == 0
    ]
    days = format_html_join("", '<text x="{}" y="{}" text-anchor="middle">{}</text>', shown)
    return format_html(
        '<svg class="chart answers" role="img" aria-label="{label}" width="{w}" height="{h}" '
        'viewBox="0 0 {w} {h}" xmlns="http://www.w3.org/2000/svg">'
        '<line x1="{l}" y1="{t}" x2="{l}" y2="{b}" class="axis"/>'
        '<line x1="{l}" y1="{b}" x2="{r}" y2="{b}" class="axis"/>{ticks}{days}{lines}'
        '<polyline class="answers-mean" points="{mean}"><title>team mean</title></polyline></svg>',
        label=f"{question.short}: answers per player", w=width, h=height, l=pad_left, t=pad_top,
        b=pad_top + plot_h, r=width - pad_right, ticks=ticks, days=days, lines=format_html_join("", "{}", (
            (line,) for line in lines)), mean=mean_xy,
    )  # fmt: skip


def answers_legend(series: Series) -> SafeString:
    """The players' colours, as the chart draws them."""
    key = '<span class="key"><span class="swatch" style="background:{}"></span>{}</span>'
    return format_html_join(
        " ", key, ((colour(i), player) for i, player in enumerate(sorted(series.players)))
    )


def _ticks(low: int, high: int) -> list[int]:
    step = max(1, (high - low) // 5)
    return list(range(low, high + 1, step))
