"""The operator's status page at /admin/status/: the engine's figures (reminders/ops/figures.py) plus the push
side (queue depth, the gateway's last delivery). Operators only; a coach gets the friendly 403 page."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlencode

from django.conf import settings
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import Sum
from django.db.models.functions import Now
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString
from django.views.decorators.http import require_POST
from kombu import Connection

from common.amqp.queues import FailoverConnector
from common.templatetags.admin_time import seconds
from delivery.api import standin_words
from delivery.models import GatewayHeartbeat, PushMinute, PushSend
from reminders.api import (
    ERROR_PREFIX,
    FAILURE_SAMPLE,
    Check,
    EngineStatus,
    MinutePoint,
    engine_status,
    failures_retry,
    readiness_check_register,
    retrying_cancel,
    retrying_retry_now,
)
from trainings.selectors import user_sees_all_teams

logger = logging.getLogger(__name__)

REFRESH_SECONDS = 10


@dataclass(frozen=True)
class GatewayLiveness:
    name: str  # host:pid of the newest heartbeat, "" if none ever
    age: timedelta | None  # by the database's clock; None: no gateway has ever run against this database
    level: str  # "ok", "amber", "red" (and "red" when there has never been one)

    @property
    def text(self) -> str:
        if self.age is None:
            return "never seen: no push gateway has run against this database"
        return f"last heartbeat {seconds(self.age)} ago ({self.name})"


@dataclass(frozen=True)
class PushStatus:
    queue: str
    depth: int | None  # messages; None: unknown (the broker did not say)
    per_message: int  # a fired reminder's pushes travel up to this many to a message
    consumers: int | None
    note: str
    gateway: GatewayLiveness
    gateway_last_at: datetime | None  # the newest finished push


def push_queue_depth() -> tuple[int | None, int | None, str]:
    """Messages waiting in the push queue and its consumers, by a passive declare: RabbitMQ answers with
    both; kombu's filesystem broker (the embedded default) counts its files and knows no consumers."""
    url = settings.REMINDERS_CALLBACK_BROKER_URL
    options = (
        dict(getattr(settings, "CELERY_BROKER_TRANSPORT_OPTIONS", {})) if url.startswith("filesystem") else {}
    )
    try:
        connector = FailoverConnector(
            lambda one: Connection(one, connect_timeout=1, transport_options=options)
        )
        with connector.connect(url) as broker:  # the first of the URL's brokers that answers
            channel: Any = broker.channel()
            try:
                _, depth, consumers = channel.queue_declare(queue=settings.TRAININGS_PUSH_QUEUE, passive=True)
            finally:
                channel.close()
            amqp = broker.transport.driver_type == "amqp"
    except Exception as exc:  # a status page reports a broker problem, it does not fail on it
        if "NOT_FOUND" in str(exc) or "no queue" in str(exc).lower():
            return 0, None, "queue not declared yet (nothing published)"
        logger.warning("status page: push queue depth unavailable: %s", exc)
        return None, None, f"unknown (the broker did not answer: {type(exc).__name__})"
    return int(depth), (int(consumers) if amqp else None), "" if amqp else "consumers: unknown on this broker"


def gateway_liveness() -> GatewayLiveness:
    """The newest gateway heartbeat and its age by the database's clock (one entry of its index)."""
    latest = (
        GatewayHeartbeat.objects.annotate(db_now=Now())
        .order_by("-seen_at")
        .values_list("name", "seen_at", "db_now")
        .first()
    )
    if latest is None:
        return GatewayLiveness("", None, "red")
    name, seen_at, now = latest
    age = max(now - seen_at, timedelta(0))
    if age.total_seconds() > settings.TRAININGS_GATEWAY_RED_SECONDS:
        level = "red"
    elif age.total_seconds() > settings.TRAININGS_GATEWAY_AMBER_SECONDS:
        level = "amber"
    else:
        level = "ok"
    return GatewayLiveness(name, age, level)


def check_gateway() -> Check | None:
    """/health/ready's gateway check: on once a gateway has ever been seen (TRAININGS_HEALTH_GATEWAY)."""
    mode = settings.TRAININGS_HEALTH_GATEWAY
    if mode == "off":
        return None
    try:
        liveness = gateway_liveness()
    except Exception as exc:
        return Check("push_gateway", False, f"cannot read its heartbeat: {type(exc).__name__}: {exc}"[:300])
    if liveness.age is None:
        return Check("push_gateway", False, liveness.text) if mode == "on" else None
    return Check("push_gateway", liveness.level != "red", liveness.text)


readiness_check_register(check_gateway)


def push_status() -> PushStatus:
    depth, consumers, note = push_queue_depth()
    # The newest send record by primary key: one index entry, however many there are.
    last = PushSend.objects.order_by("-pk").values_list("recorded_at", flat=True).first()
    return PushStatus(
        settings.TRAININGS_PUSH_QUEUE, depth, settings.TRAININGS_PUSH_MESSAGE_PUSHES, consumers, note,
        gateway_liveness(), last,
    )  # fmt: skip


def pushes_per_minute(points: list[MinutePoint]) -> list[tuple[datetime, int, int]]:
    """Device sends accepted by a phone or an inbox (and not reached) per minute, aligned with the engine's
    minutes: at most 60 rows of the gateway's per-minute record, on its primary key. A stand-in's
    acceptances reached no phone and are left out (`standins_last_hour` counts them)."""
    if not points:
        return []
    rows = {
        row.minute: row
        for row in PushMinute.objects.filter(minute__gte=points[0].minute, minute__lte=points[-1].minute)
    }
    out = []
    for point in points:
        row = rows.get(point.minute)
        out.append((point.minute, row.accepted - row.standin if row else 0, row.not_reached if row else 0))
    return out


def standins_last_hour(points: list[MinutePoint]) -> int:
    """Of the device sends accepted over the chart's minutes, those a stand-in (logging, webhook) accepted:
    nothing reached a phone. On the minutes' primary key, like `pushes_per_minute`."""
    if not points:
        return 0
    minutes = PushMinute.objects.filter(minute__gte=points[0].minute, minute__lte=points[-1].minute)
    return int(minutes.aggregate(total=Sum("standin"))["total"] or 0)


def deliveries_chart(
    points: list[MinutePoint],
    pushes: list[tuple[datetime, int, int]] | None = None,
    *,
    width: int = 960,
    height: int = 180,
) -> SafeString:
    """Occurrences delivered (and failed) per minute as bars, and pushes that reached a phone (device sends
    accepted) as a line on the same scale, with a legend: an inline SVG, no script, no external host."""
    pushes = pushes or []
    top = max([p.delivered + p.failed for p in points] + [a for _, a, _ in pushes] + [1])
    pad_left, pad_bottom, pad_top = 64, 20, 24
    plot_w, plot_h = width - pad_left - 4, height - pad_bottom - pad_top
    bar = plot_w / max(len(points), 1)
    bars = []
    for i, point in enumerate(points):
        x = pad_left + i * bar
        for value, offset, css in (
            (point.delivered, 0, "delivered"),
            (point.failed, point.delivered, "failed"),
        ):
            if value:
                h = plot_h * value / top
                y = pad_top + plot_h - plot_h * (offset + value) / top
                local = timezone.localtime(point.minute)
                bars.append(
                    (css, f"{x + 0.5:.1f}", f"{y:.1f}", f"{max(bar - 1, 1):.1f}", f"{h:.1f}",
                     f"{local:%H:%M}: {value} occurrence(s) {css}")
                )  # fmt: skip
    rects = format_html_join(
        "",
        '<rect class="{}" x="{}" y="{}" width="{}" height="{}"><title>{}</title></rect>',
        bars,
    )
    line = " ".join(
        f"{pad_left + (i + 0.5) * bar:.1f},{pad_top + plot_h - plot_h * accepted / top:.1f}"
        for i, (_, accepted, _) in enumerate(pushes)
    )
    dots = format_html_join(
        "",
        '<circle class="reached" cx="{}" cy="{}" r="2"><title>{}</title></circle>',
        (
            (f"{pad_left + (i + 0.5) * bar:.1f}", f"{pad_top + plot_h - plot_h * accepted / top:.1f}",
             f"{timezone.localtime(minute):%H:%M}: {accepted} push(es) reached a phone, {missed} did not")
            for i, (minute, accepted, missed) in enumerate(pushes)
            if accepted or missed
        ),
    )  # fmt: skip
    first, last = timezone.localtime(points[0].minute), timezone.localtime(points[-1].minute)
    return format_html(
        '<svg class="chart" role="img" aria-label="deliveries and pushes reaching phones per minute" '
        'width="{w}" height="{h}" viewBox="0 0 {w} {h}" xmlns="http://www.w3.org/2000/svg">'
        '<g class="legend"><rect class="swatch-delivered" x="{l}" y="4" width="10" height="10"/>'
        '<text x="{l1}" y="13">occurrences delivered</text>'
        '<rect class="swatch-failed" x="{l2}" y="4" width="10" height="10"/>'
        '<text x="{l3}" y="13">failed</text>'
        '<line class="reached" x1="{l4}" y1="9" x2="{l5}" y2="9"/>'
        '<text x="{l6}" y="13">pushes reaching phones (device sends accepted)</text></g>'
        '<line x1="{l}" y1="{t}" x2="{l}" y2="{b}" class="axis"/>'
        '<line x1="{l}" y1="{b}" x2="{w}" y2="{b}" class="axis"/>'
        '<text x="{tl}" y="{ty0}" text-anchor="end">{top}/min</text>'
        '<text x="{tl}" y="{b}" text-anchor="end">0</text>'
        '<text x="{l}" y="{ty}">{first}</text>'
        '<text x="{w}" y="{ty}" text-anchor="end">{last}</text>{rects}'
        '<polyline class="reached" points="{line}"/>{dots}</svg>',
        w=width,
        h=height,
        l=pad_left,
        l1=pad_left + 14,
        l2=pad_left + 160,
        l3=pad_left + 174,
        l4=pad_left + 230,
        l5=pad_left + 250,
        l6=pad_left + 256,
        t=pad_top,
        tl=pad_left - 4,
        ty0=pad_top + 8,
        b=pad_top + plot_h,
        ty=height - 4,
        top=top,
        first=f"{first:%H:%M}",
        last=f"{last:%H:%M}",
        rects=rects,
        line=line,
        dots=dots,
    )


def require_operator(request: HttpRequest) -> None:
    if not user_sees_all_teams(request.user):
        raise PermissionDenied("The status page is for operators.")


def _retrying_link(error: str) -> str:
    query = urlencode({"state": "retrying", "error": error})
    return f"{reverse('admin:reminders_occurrence_changelist')}?{query}"


def _failures_link(error: str) -> str:
    query = urlencode({"status__exact": "failed", "error": error})
    return f"{reverse('admin:reminders_occurrence_changelist')}?{query}"


def status_view(request: HttpRequest) -> HttpResponse:
    require_operator(request)
    engine: EngineStatus = engine_status()
    scan_age = None if engine.last_scan_at is None else engine.now - engine.last_scan_at
    pushes = pushes_per_minute(engine.per_minute)
    standins = standins_last_hour(engine.per_minute)
    context: dict[str, Any] = {
        **admin.site.each_context(request),
        "title": "Scheduler status",
        "engine": engine,
        "push": push_status(),
        "chart": deliveries_chart(engine.per_minute, pushes),
        "delivered_last_hour": sum(p.delivered for p in engine.per_minute),
        "reached_last_hour": sum(accepted for _, accepted, _ in pushes),
        "standin_last_hour": standins,
        # The gateway's stand-in is the one this deployment names (web and gateway read one environment).
        "standin_words": standin_words(settings.TRAININGS_PUSH_PROVIDER),
        "not_reached_last_hour": sum(missed for _, _, missed in pushes),
        "failures": [(group, _failures_link(group.error)) for group in engine.failures],
        "retrying": [(group, _retrying_link(group.error)) for group in engine.retrying],
        "retrying_total": sum(group.count for group in engine.retrying),
        "retrying_oldest": min((g.oldest_fire_at for g in engine.retrying), default=None),
        "scan_age": scan_age,
        "scan_stale": scan_age is None or scan_age > timedelta(seconds=30),
        "refresh_seconds": REFRESH_SECONDS,
        "failure_sample": FAILURE_SAMPLE,
        "zone": timezone.get_current_timezone_name(),
    }
    return TemplateResponse(request, "admin/status.html", context)


@require_POST
def status_retry_view(request: HttpRequest) -> HttpResponse:
    """Retry the last 24 h's failed occurrences whose error starts with the group's text."""
    require_operator(request)
    error = request.POST.get("error", "")[:ERROR_PREFIX]
    count = failures_retry(error=error, since=timezone.now() - timedelta(hours=24))
    messages.success(request, f"{count} failed occurrence(s) due again now.")
    return HttpResponseRedirect(reverse("admin-status"))


@require_POST
def status_retrying_view(request: HttpRequest) -> HttpResponse:
    """A retrying group's buttons: "retry" makes its occurrences due now, "cancel" cancels them (a
    schedule's cancelled fire moves the schedule on to its next)."""
    require_operator(request)
    error = request.POST.get("error", "")[:ERROR_PREFIX]
    action = request.POST.get("action", "")
    if action == "retry":
        count = retrying_retry_now(error=error)
        messages.success(request, f"{count} retrying occurrence(s) due now.")
    elif action == "cancel":
        count = retrying_cancel(error=error, reason=f"cancelled by {request.user} on the status page")
        messages.success(request, f"{count} retrying occurrence(s) cancelled.")
    else:
        return HttpResponseBadRequest("action: 'retry' or 'cancel'")
    return HttpResponseRedirect(reverse("admin-status"))
