"""The reminder effectiveness page at /admin/analytics/: for coaches (their teams) and operators (every
team), the figures of trainings/analytics/ for a period, with charts per rule and CSV downloads."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import date
from itertools import pairwise
from typing import Any

from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.utils.html import format_html_join
from django.utils.safestring import SafeString, mark_safe

from trainings.admin.analytics_charts import answer_rate_chart, colour, time_to_answer_chart
from trainings.admin.answers_chart import answers_chart, answers_legend
from trainings.admin.html import DEFAULT_SLUGS
from trainings.analytics.answers import answers_over_time
from trainings.analytics.channels import answers_by_channel
from trainings.analytics.export import offsets_csv, players_csv
from trainings.analytics.figures import (
    OffsetFigures,
    PlayerFigures,
    Scope,
    TooManyTeams,
    effectiveness,
    players,
    uncounted,
)
from trainings.analytics.serializers import AnalyticsQuerySerializer
from trainings.experiments.adaptive_page import adaptive_overview
from trainings.planning import kinds
from trainings.planning.offsets import Offset, OffsetError
from trainings.selectors import teams_visible_to

FIELDS = ("since", "until", "team", "kind")
# Past this many teams (an operator's federation) the team is typed by id: a select of thousands of options
# would be most of the page's time.
TEAM_SELECT_MAX = 200


def curve_minutes(rows: Iterable[OffsetFigures]) -> int:
    """How far a rule's curves go: the longest gap between its reminders (at least an hour, at most the last
    band's edge), the time an offset has before the next one takes over."""
    minutes = []
    for row in rows:
        try:
            minutes.append(int(Offset.parse(row.offset).approximate().total_seconds() // 60))
        except OffsetError:
            continue
    ordered = sorted(minutes)
    gap = max((b - a for a, b in pairwise(ordered)), default=60)
    return min(max(gap, 60), 4320)


def _groups(rows: list[OffsetFigures]) -> list[dict[str, Any]]:
    """The offsets per (kind, rule), each group with its two charts and its rows' colours."""
    grouped: dict[tuple[str, str], list[OffsetFigures]] = {}
    for row in rows:
        grouped.setdefault((row.kind, row.rule), []).append(row)
    return [
        {
            "kind_label": group[0].kind_label,
            "when": kinds.of(kind).when if kind in kinds.KINDS else "",
            "rule": rule,
            "rule_named": "" if rule in DEFAULT_SLUGS else rule,  # a coach's own; the seeded by kind
            "rows": [(row, colour(i)) for i, row in enumerate(group)],
            "rate_chart": answer_rate_chart(group),
            "curve_chart": time_to_answer_chart(group, until_minutes=curve_minutes(group)),
            "curve_minutes": curve_minutes(group),
        }
        for (kind, rule), group in grouped.items()
    ]


def players_table_rows(rows: list[PlayerFigures]) -> SafeString:
    """The player table's rows, built here rather than by a template loop: a coach of several teams has
    hundreds, and the template engine's loop was most of the page's time."""
    return format_html_join(
        "",
        '<tr data-player="{}"{}><td>{}{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>'
        "<td>{}%</td></tr>",
        (
            (row.name, mark_safe(' class="chronic"') if row.chronic else "", row.name,
             mark_safe(" <strong>chronic</strong>") if row.chronic else "", row.figures.asked,
             row.figures.before_reminder, row.figures.after_reminder, row.figures.after_last,
             row.figures.never, round(100 * (row.late_or_never_rate or 0)))
            for row in rows
        ),
    )  # fmt: skip


def _answers_context(scope: Scope, since: date, until: date) -> dict[str, Any]:
    """The answers per question of one team (a chart each); a note asking for a team when there are more."""
    if scope.teams is None or len(scope.teams) != 1:
        return {"answers_note": "Choose one team to see its players' answers per question."}
    charts = []
    for one in answers_over_time(scope.teams[0], since, until):
        question = one.question
        charts.append({
            "phase": one.phase, "id": question.id, "phase_label": kinds.of(one.phase).label,
            "short": question.short, "minimum": question.minimum, "maximum": question.maximum,
            "ends": ", ".join(f"{value} {label}" for value, label in question.labels if value in
                              (question.minimum, question.maximum)),
            "empty": not one.players, "chart": answers_chart(one), "legend": answers_legend(one),
        })  # fmt: skip
    return {"answers": charts}


def _csv(body: str, name: str) -> HttpResponse:
    response = HttpResponse(body, content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{name}.csv"'
    return response


def analytics_view(request: HttpRequest) -> HttpResponse:
    data = {name: request.GET[name] for name in FIELDS if request.GET.get(name)}
    query = AnalyticsQuerySerializer(data=data, context={"user": request.user})
    context: dict[str, Any] = {
        **admin.site.each_context(request),
        "title": "Reminder effectiveness",
        "teams": list(teams_visible_to(request.user).order_by("name", "pk")[: TEAM_SELECT_MAX + 1]),
        "kinds": kinds.rule_choices(),
        "chosen": data,
    }
    context["team_by_id"] = len(context["teams"]) > TEAM_SELECT_MAX
    if not query.is_valid():
        context["errors"] = {field: " ".join(map(str, errors)) for field, errors in query.errors.items()}
        return TemplateResponse(request, "admin/analytics.html", context, status=400)
    q = query.validated_data
    scope, since, until = q["scope"], q["since"], q["until"]
    result = effectiveness(scope=scope, since=since, until=until, kind=q["kind"])
    try:
        player_rows, players_note = players(scope=scope, since=since, until=until, kind=q["kind"]), ""
    except TooManyTeams as exc:
        player_rows, players_note = [], str(exc)
    export = request.GET.get("export")
    if export == "offsets":
        return _csv(offsets_csv(result, since=since, until=until, teams=scope.label),
                    f"reminder-effectiveness-{since}-{until}")  # fmt: skip
    if export == "players" and not players_note:
        return _csv(players_csv(player_rows, since=since, until=until, teams=scope.label),
                    f"reminder-players-{since}-{until}")  # fmt: skip
    context["players_rows"] = players_table_rows(player_rows)
    context.update(
        since=since, until=until, scope=scope, groups=_groups(result.offsets), unreminded=result.unreminded,
        players=player_rows, players_note=players_note, chronic=sum(p.chronic for p in player_rows),
        query=request.GET.urlencode(),
    )  # fmt: skip
    context.update(_answers_context(scope, since, until))
    context["channels"] = answers_by_channel(scope=scope, since=since, until=until, kind=q["kind"])
    context["adaptive"] = adaptive_overview(request.user)
    if not result.offsets:  # "none went out" only once the summaries hold what went out
        context["uncounted"] = uncounted(scope=scope, since=since, until=until, kind=q["kind"])
    return TemplateResponse(request, "admin/analytics.html", context)
