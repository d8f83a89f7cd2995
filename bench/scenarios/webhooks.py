"""15. Events back: N answers (1,000) recorded through their answer links become N `answer.recorded`
deliveries to a loopback receiver, by the engine's HTTP callbacks, with the time to the last one.

A real worker and beat run (REMINDERS_HTTP_ALLOW_PRIVATE=1 in their environment, so the SSRF guard lets
the loopback receiver in). The receiver is an HTTP server in this process, in threads, that verifies every
request with the Standard Webhooks library (`standardwebhooks.Webhook(secret).verify`) and answers 200.
The answers are recorded here, one after the other, through `answer_link_answer` (what the link's POST
runs, one statement each); the clock starts before the first answer and stops when the last delivery
arrives. The competitor in the same run: the same N answers on another training with no subscriber, to
show what an event costs the answer itself.
Target: every delivery verified and none missing, the last one within 60 s of the first answer.
"""

from __future__ import annotations

import threading
import time
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from bench.harness import Harness
from bench.report import Row, Section

TARGET_SECONDS = 60.0


class _Received:
    """Arrivals at the receiver: (monotonic time, webhook-id) per verified request, and the refusals."""

    def __init__(self, secret: str) -> None:
        from standardwebhooks.webhooks import Webhook

        self.verifier = Webhook(secret)
        self.lock = threading.Lock()
        self.arrivals: list[tuple[float, str]] = []
        self.refused = 0
        self.all_in = threading.Event()
        self.expected = 0

    def handler(self) -> type[BaseHTTPRequestHandler]:
        received = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                headers = {k.lower(): v for k, v in self.headers.items()}
                try:
                    received.verifier.verify(body, headers)
                    ok = True
                except Exception:
                    ok = False
                self.send_response(200 if ok else 400)
                self.send_header("Content-Length", "0")
                self.end_headers()
                with received.lock:
                    if ok:
                        received.arrivals.append((time.monotonic(), headers["webhook-id"]))
                    else:
                        received.refused += 1
                    if len({i for _, i in received.arrivals}) >= received.expected:
                        received.all_in.set()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return Handler


def _answers(links: list[Any]) -> float:
    """Record one invitation answer per link, as the link's POST does; returns the seconds it took."""
    from trainings.answers.following import answer_link_answer

    started = time.perf_counter()
    for link in links:
        answer_link_answer(link, response="accepted")
    return time.perf_counter() - started


def run(h: Harness) -> Section:
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Permission
    from django.utils import timezone
    from django_celery_beat.models import IntervalSchedule, PeriodicTask

    from reminders.beat import ensure_periodic_tasks
    from trainings import models as tm
    from trainings.answers.links import answer_link_read, answer_token
    from trainings.planning.writes import training_create
    from trainings.webhooks.subscriptions import subscription_create

    section = Section("webhooks")
    n = 200 if h.quick else 1_000
    ensure_periodic_tasks(IntervalSchedule, PeriodicTask)
    team = tm.Team.objects.create(name="bench webhooks", time_zone="Europe/Paris", quiet_start=None,
                                  quiet_end=None)  # fmt: skip
    players = tm.Player.objects.bulk_create([tm.Player(name=f"bench webhook {i}") for i in range(n)])
    tm.Membership.objects.bulk_create([tm.Membership(team=team, player=p, active=True) for p in players])
    start = (timezone.now() + timedelta(days=2)).replace(microsecond=0)
    trainings = [
        training_create(team=team, title=f"Bench webhooks {i}", start=start + timedelta(hours=i),
                        end=start + timedelta(hours=i, minutes=90), time_zone="Europe/Paris")
        for i in range(2)
    ]  # fmt: skip
    links = [
        [answer_link_read(answer_token(player_id=p.pk, training_id=t.pk, kind="INVITATION")) for p in players]
        for t in trainings
    ]
    plain_seconds = _answers(links[0])  # no subscriber yet: the answers alone

    owner, _ = get_user_model().objects.get_or_create(username="bench-platform")
    owner.user_permissions.add(Permission.objects.get(codename="use_integration_api"))
    server = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    url = f"http://127.0.0.1:{server.server_address[1]}/events"
    subscription = subscription_create(owner=owner, url=url, events=["answer.recorded"])
    received = _Received(subscription.secret)
    received.expected = n
    server.RequestHandlerClass = received.handler()
    serving = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    serving.start()
    worker = h.worker("webhooks-worker", REMINDERS_HTTP_ALLOW_PRIVATE="1")
    beat = h.beat("webhooks-beat")
    try:
        h.wait_for_log("webhooks-beat", "beat: Starting", timeout=30, proc=beat)
        time.sleep(2.0)  # the worker is in its scan loop, waiting
        began = time.monotonic()
        answer_seconds = _answers(links[1])
        received.all_in.wait(timeout=TARGET_SECONDS * 3)
        waited = time.monotonic() - began
    finally:
        h.stop(beat)
        h.stop(worker)
        server.shutdown()
        server.server_close()
    ids = {i for _, i in received.arrivals}
    last = max((at for at, _ in received.arrivals), default=began + waited) - began
    complete = len(ids) == n and received.refused == 0
    jobs = tm.WebhookJob.objects.filter(subscription=subscription).count()
    section.rows += [
        Row(
            f"15a events: {n:,} answers → {n:,} answer.recorded deliveries to a loopback receiver, time to "
            "the last one",
            last,
            answer_seconds,
            "recording the answers",
            "s",
            len(ids) / max(last, 1e-9),
            "deliveries/s",
            f"all {n:,} within {TARGET_SECONDS:.0f} s",
            passed=complete and last <= TARGET_SECONDS,
            note=f"{len(ids):,} distinct webhook-ids verified by standardwebhooks, "
            f"{len(received.arrivals):,} requests, {received.refused} refused, {jobs:,} delivery jobs; one "
            f"worker and beat; the clock starts before the first answer (waited {waited:.1f} s)",
        ),
        Row(
            "15b answer link with a subscriber vs none: time per answer (one statement, or one "
            "transaction with the event's job)",
            answer_seconds / n * 1e6,
            plain_seconds / n * 1e6,
            "no subscriber",
            "µs",
            answer_seconds / max(plain_seconds, 1e-9),
            "of no subscriber",
            note="in this process, one answer after the other (no HTTP): what an event adds to the answer",
        ),
    ]
    section.data = {
        "arrivals": len(received.arrivals),
        "distinct": len(ids),
        "refused": received.refused,
        "last_seconds": last,
        "answer_seconds": answer_seconds,
        "plain_seconds": plain_seconds,
    }
    return section
