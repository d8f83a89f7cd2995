"""The adaptive experiment's part of its admin page: the posterior now (each arm's answer rate, its
probability of being best, the leader's chance that no arm beats it by more than a point, against the
stopping rule) and, from the stored snapshots, two charts over time: the arms' answer-rate curves and
their probabilities of being best. Inline SVG like the effectiveness page's charts: no script."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.db.models import Case, When
from django.urls import reverse
from django.utils.formats import date_format
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString
from django.utils.translation import gettext as _

from trainings.experiments.bandit import MARGIN, MIN_TRAININGS, THRESHOLD, Report, posterior, report, seeded
from trainings.experiments.results import ExperimentResult, arms_of
from trainings.models import Experiment, ExperimentStatus
from trainings.models.experiments import AdaptiveSnapshot, ExperimentMode
from trainings.selectors import user_sees_all_teams

COLOURS = ("#1b5e8c", "#2e7d32", "#b26a00", "#8e24aa", "#c62828")  # the rule, then up to four variants


def colour(arm: int) -> str:
    return COLOURS[arm % len(COLOURS)]


@dataclass(frozen=True)
class ArmNow:
    arm: int
    label: str
    asked: int
    in_time: int
    mean: float  # the posterior mean of the answer rate
    best: float


def live_report(experiment: Experiment, result: ExperimentResult) -> Report:
    """The report the next snapshot would store, from the results' counts (the same seed)."""
    in_time = [arm.in_time for arm in result.arms]
    asked = [arm.asked for arm in result.arms]
    return report(in_time, asked, rng=seeded("report", experiment.pk, *in_time, *asked))


def adaptive_context(experiment: Experiment, result: ExperimentResult) -> dict[str, Any] | None:
    """What the experiment page shows of an adaptive experiment (None for a fixed one)."""
    if experiment.mode != ExperimentMode.ADAPTIVE:
        return None
    figures = live_report(experiment, result)
    arms = []
    for arm, best in zip(result.arms, figures.best, strict=True):
        a, b = posterior(arm.in_time, arm.asked)
        arms.append(ArmNow(arm.arm, arm.label, arm.asked, arm.in_time, a / (a + b), best))
    snapshots = list(AdaptiveSnapshot.objects.filter(experiment=experiment).order_by("taken_at", "id"))
    labels = [arm.label for arm in result.arms]
    rates = [[posterior(x, n)[0] / sum(posterior(x, n)) for x, n in zip(s.in_time, s.asked, strict=True)]
             for s in snapshots]  # fmt: skip
    return {
        "arms": arms,
        "leader": labels[figures.leader],
        "within": figures.within,
        "decided": figures.decided(result.trainings),
        "rule": _(
            "Stops when the leader has at least %(threshold)s probability that no other arm answers more "
            "than %(margin)s percentage point better, after at least %(trainings)d trainings."
        )
        % {"threshold": f"{THRESHOLD:.0%}", "margin": f"{100 * MARGIN:g}", "trainings": MIN_TRAININGS},
        "snapshots": snapshots,
        "rates_chart": line_chart(
            snapshots, labels, rates, label=_("answer rate per arm over time (posterior mean)")
        ),
        "best_chart": line_chart(
            snapshots,
            labels,
            [s.best for s in snapshots],
            label=_("probability of being best over time"),
            within=[s.leader_within for s in snapshots],
        ),
    }


OVERVIEW = 5  # adaptive experiments on the effectiveness page, running first, then the newest


def adaptive_overview(user: Any) -> list[dict[str, Any]]:
    """The effectiveness page's adaptive experiments (operators only: they span every team), each with
    its snapshots' charts and the newest snapshot's leader; no Monte Carlo here (the stored figures)."""
    if not user_sees_all_teams(user):
        return []
    experiments = (
        Experiment.objects.filter(mode=ExperimentMode.ADAPTIVE)
        .select_related("rule", "promoted")
        .prefetch_related("variants")
        .order_by(Case(When(status=ExperimentStatus.RUNNING, then=0), default=1), "-started_at")[:OVERVIEW]
    )
    out = []
    for experiment in experiments:
        snapshots = list(AdaptiveSnapshot.objects.filter(experiment=experiment).order_by("taken_at", "id"))
        labels = [arm.label for arm in arms_of(experiment)]
        rates = [[posterior(x, n)[0] / sum(posterior(x, n)) for x, n in zip(s.in_time, s.asked, strict=True)]
                 for s in snapshots]  # fmt: skip
        newest = snapshots[-1] if snapshots else None
        out.append({
            "experiment": experiment,
            "url": reverse("admin:trainings_experiment_change", args=[experiment.pk]),
            "leader": labels[newest.leader] if newest and newest.leader < len(labels) else None,
            "within": newest.leader_within if newest else None,
            "rates_chart": line_chart(snapshots, labels, rates, label=_("answer rate per arm over time "
                                                                        "(posterior mean)")),
            "best_chart": line_chart(snapshots, labels, [s.best for s in snapshots],
                                     label=_("probability of being best over time"),
                                     within=[s.leader_within for s in snapshots]),
        })  # fmt: skip
    return out


def line_chart(
    snapshots: Sequence[AdaptiveSnapshot],
    labels: Sequence[str],
    values: Sequence[Sequence[float]],
    *,
    label: str,
    within: Sequence[float] | None = None,
    width: int = 460,
    height: int = 220,
) -> SafeString:
    """One line per arm over the snapshots (0 to 100 %); with `within`, the leader's chance that no arm
    beats it by more than the margin, dashed, and the stopping threshold."""
    pad_left, pad_bottom, pad_top = 40, 20, 22
    plot_w, plot_h = width - pad_left - 8, height - pad_bottom - pad_top
    count = len(snapshots)

    def x(i: int) -> float:
        return pad_left + (plot_w * i / (count - 1) if count > 1 else plot_w / 2)

    def y(v: float) -> float:
        return pad_top + plot_h - plot_h * v

    lines = []
    for arm, name in enumerate(labels):
        points = " ".join(f"{x(i):.1f},{y(row[arm]):.1f}" for i, row in enumerate(values) if arm < len(row))
        final = values[-1][arm] if values and arm < len(values[-1]) else None
        title = f"{name}: {final:.0%}" if final is not None else name
        lines.append((colour(arm), points, title))
    polylines = format_html_join(
        "", '<polyline class="curve" stroke="{}" points="{}"><title>{}</title></polyline>', lines
    )
    keys = format_html_join(
        "",
        '<rect x="{}" y="4" width="10" height="10" fill="{}"/><text x="{}" y="13">{}</text>',
        ((pad_left + 8 + i * 90, colour(i), pad_left + 20 + i * 90, name) for i, name in enumerate(labels)),
    )
    extra = SafeString("")
    if within is not None:
        dashed = " ".join(f"{x(i):.1f},{y(v):.1f}" for i, v in enumerate(within))
        extra = format_html(
            '<polyline class="curve within" stroke="#333" stroke-dasharray="4 3" points="{}"><title>{}'
            '</title></polyline><line class="threshold" x1="{}" y1="{}" x2="{}" y2="{}" stroke="#c62828" '
            'stroke-dasharray="2 2"/><text x="{}" y="{}" text-anchor="end" class="threshold">{}</text>',
            dashed, _("the leader within a point of the best"), pad_left, f"{y(THRESHOLD):.1f}", width,
            f"{y(THRESHOLD):.1f}", width - 2, f"{y(THRESHOLD) - 3:.1f}", f"{THRESHOLD:.0%}",
        )  # fmt: skip
    first = date_format(snapshots[0].taken_at, "SHORT_DATE_FORMAT") if snapshots else ""
    last = date_format(snapshots[-1].taken_at, "SHORT_DATE_FORMAT") if snapshots else ""
    return format_html(
        '<svg class="chart adaptive" role="img" aria-label="{label}" width="{w}" height="{h}" '
        'viewBox="0 0 {w} {h}" xmlns="http://www.w3.org/2000/svg"><g class="legend">{keys}</g>'
        '<line x1="{l}" y1="{t}" x2="{l}" y2="{b}" class="axis"/>'
        '<line x1="{l}" y1="{b}" x2="{w}" y2="{b}" class="axis"/>'
        '<text x="{tl}" y="{ty}" text-anchor="end">100%</text>'
        '<text x="{tl}" y="{b}" text-anchor="end">0</text>'
        '<text x="{l}" y="{hy}">{first}</text><text x="{w}" y="{hy}" text-anchor="end">{last}</text>'
        "{polylines}{extra}</svg>",
        label=label, w=width, h=height, l=pad_left, t=pad_top, b=pad_top + plot_h, tl=pad_left - 4,
        ty=pad_top + 8, hy=height - 4, first=first, last=last, keys=keys, polylines=polylines, extra=extra,
    )  # fmt: skip
