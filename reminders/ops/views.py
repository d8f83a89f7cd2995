"""Operations endpoints outside the API: Prometheus `/metrics`, `/health/live`, `/health/ready`.

Plain Django views (no DRF authentication, throttling or content negotiation): probes and scrapers must get
an answer even when the API is refusing work. What they tell is for the operators: `/metrics` serves
loopback and private callers (or the bearer of METRICS_BEARER_TOKEN) only, and `/health/ready` tells
everyone else its status alone, within a per-address limit (each check opens a broker connection).
"""

from __future__ import annotations

import hmac
import ipaddress
import os

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET
from prometheus_client import (
    CONTENT_TYPE_PLAIN_0_0_4,
    REGISTRY,
    CollectorRegistry,
    generate_latest,
    multiprocess,
)

from reminders.http.counts import request_count
from reminders.http.limits import client_ip, too_many
from reminders.ops.db_gauges import DatabaseCollector
from reminders.ops.health import readiness

# Loopback and the private ranges a scraper inside the same network comes from (RFC 1918, IPv6 ULA).
_LOCAL_NETWORKS = [
    ipaddress.ip_network(net)
    for net in ("127.0.0.0/8", "::1/128", "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "fc00::/7")
]


@never_cache
@require_GET
def metrics(request: HttpRequest) -> HttpResponse:
    """Every process's samples on this host (multiprocess mode) plus the database gauges."""
    denied = _metrics_denied(request)
    if denied is not None:
        return denied
    database = CollectorRegistry(auto_describe=False)
    database.register(DatabaseCollector())
    path = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if path:
        # Counters of processes that have exited stay in the directory (their increments happened);
        # run-all.sh empties it at start, as prometheus-client requires.
        processes = CollectorRegistry(auto_describe=False)
        multiprocess.MultiProcessCollector(processes, path=path)
        body = generate_latest(processes) + generate_latest(database)
    else:
        body = generate_latest(REGISTRY) + generate_latest(database)
    # The classic text format (0.0.4) every Prometheus server version reads.
    return HttpResponse(body, content_type=CONTENT_TYPE_PLAIN_0_0_4)


def _metrics_denied(request: HttpRequest) -> HttpResponse | None:
    """With METRICS_BEARER_TOKEN set, that token is required from everyone; without it, only direct
    requests from loopback or private addresses are served (a request a proxy forwarded is not direct)."""
    token = settings.METRICS_BEARER_TOKEN
    if token:
        sent = request.headers.get("Authorization", "")
        if hmac.compare_digest(sent.encode(), f"Bearer {token}".encode()):
            return None
        response = JsonResponse({"detail": "metrics need Authorization: Bearer <token>"}, status=401)
        response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    if "X-Forwarded-For" in request.headers or "Forwarded" in request.headers:
        return JsonResponse({"detail": "metrics are not served through a proxy without a token"}, status=403)
    try:
        address = ipaddress.ip_address(request.META.get("REMOTE_ADDR", ""))
    except ValueError:
        address = None
    if address is None or not any(address in network for network in _LOCAL_NETWORKS):
        return JsonResponse(
            {"detail": "metrics are served to loopback and private addresses only"}, status=403
        )
    return None


@never_cache
def live(request: HttpRequest) -> JsonResponse:
    """The process answers; nothing else is checked (a restart would not fix a dead database)."""
    return JsonResponse({"status": "ok"})


@never_cache
def ready(request: HttpRequest) -> HttpResponse:
    """200 when the database and its schema, the broker and the scan are all fine; else 503. Operators
    (`_sees_detail`) read what failed and each check's detail (hosts, vhosts, workers); anyone else reads
    the status alone, counted per address at REMINDERS_HEALTH_READY_RATE."""
    detail = _sees_detail(request)
    if not detail:
        refused = request_count(
            scope="ready", ident=client_ip(request), rate=settings.REMINDERS_HEALTH_READY_RATE
        )
        if refused is not None:
            return too_many(refused, json=True)
    checks = readiness()
    failing = [check.name for check in checks if not check.ok]
    body: dict[str, object] = {"status": "fail" if failing else "ok"}
    if detail:
        body["failing"] = failing
        body["checks"] = {check.name: check.as_dict() for check in checks}
    return JsonResponse(body, status=503 if failing else 200)


def _sees_detail(request: HttpRequest) -> bool:
    """Whoever `/metrics` serves (a direct loopback or private caller, or the metrics token's bearer), and
    a signed-in staff member holding REMINDERS_OPERATOR_PERMISSION (or a superuser)."""
    if _metrics_denied(request) is None:
        return True
    user = getattr(request, "user", None)
    if user is None or not (user.is_authenticated and user.is_active and user.is_staff):
        return False
    return bool(user.is_superuser or user.has_perm(settings.REMINDERS_OPERATOR_PERMISSION))
