"""Events back to the platform: `GET/POST /api/webhooks/`, `DELETE /api/webhooks/{id}/`, and the signed
deliveries the engine makes of `answer.recorded` and `push.outcome` to a loopback receiver, verified with
the Standard Webhooks library as a receiver would (on PostgreSQL and on the embedded SQLite default);
retries keep their `webhook-id`; a subscription whose deliveries fail for a day is disabled and shown so
to operators."""

from __future__ import annotations

import base64
import datetime as dt
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from django.contrib.auth.models import Permission
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient
from standardwebhooks.webhooks import Webhook

from delivery.gateway.records import pushes_finish
from delivery.messages import PushMessage
from delivery.models import PushSend, SendStatus
from reminders.engine.dispatch import occurrences_dispatch_batch
from reminders.models import Job, Occurrence, OccurrenceStatus
from tests.factories import WELLNESS, GuardianFactory, UserFactory, training_made
from tests.http_receiver import QuietHandler, serving
from trainings.answers.links import answer_token
from trainings.models import Player, Team, Training, WebhookSubscription
from trainings.selectors import user_sees_all_teams
from trainings.webhooks.subscriptions import subscriptions_failing_disable

pytestmark = [pytest.mark.django_db(transaction=True)]

START = dt.datetime(2030, 6, 11, 16, tzinfo=dt.UTC)


@dataclass
class Receiver:
    """What the loopback receiver was sent; it answers `statuses` in turn, then 200."""

    url: str = ""
    requests: list[tuple[dict[str, str], bytes]] = field(default_factory=list)
    statuses: list[int] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def events(self, secret: str) -> list[dict[str, Any]]:
        """Every body received, each verified with the subscription's secret as a receiver would."""
        return [Webhook(secret).verify(body, headers) for headers, body in self.requests]


@pytest.fixture
def receiver(settings: Any) -> Iterator[Receiver]:
    settings.REMINDERS_HTTP_ALLOW_PRIVATE = True  # the SSRF guard lets the test's loopback receiver in
    settings.REMINDERS_HTTP_READ_TIMEOUT = 2.0
    state = Receiver()

    class Handler(QuietHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            with state.lock:
                state.requests.append(({k.lower(): v for k, v in self.headers.items()}, body))
                status = state.statuses.pop(0) if state.statuses else 200
            self.answer(status)

    with serving(Handler) as port:
        state.url = f"http://127.0.0.1:{port}/events"
        yield state


def _caller(name: str) -> Any:
    user = UserFactory(username=name)
    user.user_permissions.add(Permission.objects.get(codename="use_integration_api"))
    return user


def _api(user: Any) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def _subscribe(client: APIClient, url: str, events: list[str]) -> dict[str, Any]:
    response = client.post("/api/webhooks/", {"url": url, "events": events}, format="json")
    assert response.status_code == 201, response.content
    body: dict[str, Any] = response.json()
    return body


def _deliver() -> None:
    """Run the engine's due scan until nothing due is left (a retry is due later, not now)."""
    for _ in range(5):
        if not occurrences_dispatch_batch().claimed:
            return


def _due_now(job_prefix: str = "trainings-webhook-") -> None:
    Occurrence.objects.filter(job__key__startswith=job_prefix, status=OccurrenceStatus.SCHEDULED).update(
        next_attempt_at=timezone.now() - dt.timedelta(seconds=1)
    )


# --- the routes ------------------------------------------------------------------------------------------


def test_a_subscription_shows_its_secret_once_and_each_caller_sees_only_their_own(receiver: Receiver) -> None:
    platform, other = _caller("platform"), _caller("other-platform")
    created = _subscribe(_api(platform), receiver.url, ["answer.recorded", "push.outcome"])

    secret = created["secret"]
    assert secret.startswith("whsec_") and len(base64.b64decode(secret.removeprefix("whsec_"))) >= 24
    assert created["status"] == "active" and created["events"] == ["answer.recorded", "push.outcome"]
    listed = _api(platform).get("/api/webhooks/").json()["results"]
    assert [row["id"] for row in listed] == [created["id"]]
    assert "secret" not in listed[0] and secret not in json.dumps(listed)
    assert _api(other).get("/api/webhooks/").json()["results"] == []
    assert _api(other).delete(f"/api/webhooks/{created['id']}/").status_code == 404
    operator = UserFactory(username="operator")
    operator.user_permissions.add(Permission.objects.get(codename="manage_all_teams"))
    assert user_sees_all_teams(operator)
    assert [r["id"] for r in _api(operator).get("/api/webhooks/").json()["results"]] == [created["id"]]
    assert _api(platform).delete(f"/api/webhooks/{created['id']}/").status_code == 204
    assert not WebhookSubscription.objects.exists()


def test_only_integration_callers_and_operators_reach_the_routes(receiver: Receiver) -> None:
    coach = UserFactory(username="coach", is_staff=True)
    assert _api(coach).get("/api/webhooks/").status_code == 403
    response = _api(coach).post(
        "/api/webhooks/", {"url": receiver.url, "events": ["push.outcome"]}, format="json"
    )
    assert response.status_code == 403
    assert APIClient().get("/api/webhooks/").status_code == 401
    assert not WebhookSubscription.objects.exists()


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"url": "http://127.0.0.1:9/x", "events": ["answer.recorded"]}, "url"),  # loopback: the SSRF guard
        ({"url": "ftp://example.com/x", "events": ["answer.recorded"]}, "url"),
        ({"url": "https://example.com/x", "events": ["training.moved"]}, "events"),
        ({"url": "https://example.com/x", "events": []}, "events"),
        ({"url": "https://example.com/x", "events": ["push.outcome", "push.outcome"]}, "events"),
        ({"url": "https://example.com/x", "events": ["push.outcome"], "secret": "mine"}, "secret"),
    ],
)
def test_bad_input_is_a_400_naming_the_field_and_writes_nothing(body: dict[str, Any], field: str) -> None:
    response = _api(_caller("platform")).post("/api/webhooks/", body, format="json")
    assert response.status_code == 400 and field in response.json(), response.content
    assert not WebhookSubscription.objects.exists()


# --- answer.recorded -------------------------------------------------------------------------------------


@pytest.fixture
def training(team: Team) -> Training:
    return training_made(team, START, location="Stadium")


def test_every_way_an_answer_is_recorded_sends_one_signed_event(
    receiver: Receiver, training: Training, coach: Any
) -> None:
    secret = _subscribe(_api(_caller("platform")), receiver.url, ["answer.recorded"])["secret"]
    alice, bruno = Player.objects.get(name="Alice"), Player.objects.get(name="Bruno")
    mother = GuardianFactory(name="Alice's mother", player=alice)
    link = Client()
    # A player's own link (one statement), the same answer again (no change: no event), a guardian's link,
    # the email's answer page (a form), and a coach through the API (an invitation and a questionnaire).
    token = answer_token(player_id=alice.pk, training_id=training.pk, kind="INVITATION")
    for _ in range(2):
        answered = link.post(
            f"/api/answer-links/{token}/", '{"response": "accepted"}', content_type="application/json"
        )
        assert answered.status_code == 200, answered.content
    token = answer_token(player_id=alice.pk, training_id=training.pk, kind="PRE", guardian_id=mother.pk)
    answered = link.post(
        f"/api/answer-links/{token}/", {"answers": WELLNESS}, content_type="application/json"
    )
    assert answered.status_code == 200, answered.content
    token = answer_token(player_id=bruno.pk, training_id=training.pk, kind="INVITATION", channel="email")
    assert link.post(f"/answer/{token}/", {"response": "denied"}).status_code in (200, 302)
    coach_api = _api(coach)
    path = f"/api/trainings/{training.pk}/"
    assert (
        coach_api.post(
            path + "invitation/", {"player": bruno.pk, "status": "ACCEPTED"}, format="json"
        ).status_code
        == 200
    )
    assert coach_api.post(path + "answers/", {"player": bruno.pk, "phase": "POST", "answers": {"rpe": 6}},
                          format="json").status_code == 201  # fmt: skip

    _deliver()

    events = receiver.events(secret)
    assert [e["type"] for e in events] == ["answer.recorded"] * 5
    by = {(e["data"]["player"]["id"], e["data"]["kind"], e["data"]["source"]): e["data"] for e in events}
    own = by[alice.pk, "INVITATION", "push_action"]
    assert own["answer"] == {"response": "accepted"} and own["guardian"] is None
    assert own["training"]["id"] == str(training.pk) and own["training"]["title"] == training.title
    assert "external_id" in own["player"]
    assert by[alice.pk, "PRE", "push_action"]["guardian"] == {"id": mother.pk}
    assert by[alice.pk, "PRE", "push_action"]["answer"] == {"answers": WELLNESS}
    assert by[bruno.pk, "INVITATION", "email_link"]["answer"] == {"response": "denied"}
    assert by[bruno.pk, "INVITATION", "admin"]["answer"] == {"response": "accepted"}
    assert by[bruno.pk, "POST", "admin"]["answer"] == {"answers": {"rpe": 6}}
    assert all(dt.datetime.fromisoformat(e["data"]["at"]) <= timezone.now() for e in events)
    assert len({headers["webhook-id"] for headers, _ in receiver.requests}) == 5


def test_a_failed_delivery_is_retried_with_the_same_webhook_id_and_a_fresh_signature(
    receiver: Receiver, training: Training
) -> None:
    secret = _subscribe(_api(_caller("platform")), receiver.url, ["answer.recorded"])["secret"]
    receiver.statuses = [503]
    alice = Player.objects.get(name="Alice")
    token = answer_token(player_id=alice.pk, training_id=training.pk, kind="INVITATION")
    Client().post(f"/api/answer-links/{token}/", '{"response": "denied"}', content_type="application/json")

    _deliver()
    occurrence = Occurrence.objects.get(job__key__startswith="trainings-webhook-")
    assert occurrence.status == OccurrenceStatus.SCHEDULED and occurrence.attempts == 1  # backing off
    assert occurrence.next_attempt_at > timezone.now()
    _due_now()
    _deliver()

    (first, body), (second, again) = receiver.requests
    assert body == again and first["webhook-id"] == second["webhook-id"]
    assert Webhook(secret).verify(again, second)["data"]["answer"] == {
        "response": "denied"
    }  # the attempt's time
    occurrence.refresh_from_db()
    assert occurrence.status == OccurrenceStatus.DELIVERED
    job = Job.objects.get(pk=occurrence.job_id)
    assert secret not in json.dumps(
        job.payload
    )  # the secret signs; it is not in what is sent or stored as payload


def test_no_subscriber_no_job(training: Training) -> None:
    alice = Player.objects.get(name="Alice")
    token = answer_token(player_id=alice.pk, training_id=training.pk, kind="INVITATION")
    Client().post(f"/api/answer-links/{token}/", '{"response": "denied"}', content_type="application/json")
    assert not Job.objects.filter(key__startswith="trainings-webhook-").exists()


def test_a_deleted_subscription_gets_nothing_more(receiver: Receiver, training: Training) -> None:
    platform = _api(_caller("platform"))
    created = _subscribe(platform, receiver.url, ["answer.recorded"])
    alice = Player.objects.get(name="Alice")
    token = answer_token(player_id=alice.pk, training_id=training.pk, kind="INVITATION")
    Client().post(f"/api/answer-links/{token}/", '{"response": "denied"}', content_type="application/json")
    assert platform.delete(f"/api/webhooks/{created['id']}/").status_code == 204
    _deliver()
    assert receiver.requests == []
    assert not Occurrence.objects.filter(
        job__key__startswith="trainings-webhook-", status=OccurrenceStatus.SCHEDULED
    ).exists()


# --- push.outcome ----------------------------------------------------------------------------------------


def _push(key: str, player: Player, training: Training) -> PushMessage:
    body = {"idempotency_key": key, "player": player.pk, "title": "t", "body": "b",
            "training": str(training.pk), "kind": "PRE"}  # fmt: skip
    return PushMessage.from_body(body)


def test_the_gateway_sends_each_finished_pushs_outcome(receiver: Receiver, training: Training) -> None:
    secret = _subscribe(_api(_caller("platform")), receiver.url, ["push.outcome"])["secret"]
    alice, bruno, chloe = (Player.objects.get(name=n) for n in ("Alice", "Bruno", "Chloe"))
    reached, dead, none = (
        _push("occ.1", alice, training),
        _push("occ.2", bruno, training),
        _push("occ.3", chloe, training),
    )
    now = timezone.now()
    alice_device = alice.devices.create(provider="fcm", platform="android", token="a-token")
    bruno_device = bruno.devices.create(provider="apns", platform="ios", token="b-token")
    PushSend.objects.create(
        push_key="occ.1",
        device=alice_device,
        player_id=alice.pk,
        provider="fcm",
        status=SendStatus.ACCEPTED,
        recorded_at=now,
    )
    PushSend.objects.create(
        push_key="occ.2",
        device=bruno_device,
        player_id=bruno.pk,
        provider="apns",
        status=SendStatus.TOKEN_DEAD,
        recorded_at=now,
    )

    pushes_finish([], [(2, none, SendStatus.NO_DEVICE)], [(0, reached), (1, dead)], now)
    _deliver()

    outcomes = {e["data"]["push"]: e["data"] for e in receiver.events(secret)}
    assert {k: (v["outcome"], v["channel"]) for k, v in outcomes.items()} == {
        "occ.1": ("reached", "fcm"),
        "occ.2": ("token_dead", "apns"),
        "occ.3": ("no_device", None),
    }
    assert outcomes["occ.1"]["player"]["id"] == alice.pk and outcomes["occ.1"]["training"] == str(training.pk)


# --- an endpoint failing for a day -----------------------------------------------------------------------


def test_an_endpoint_failing_for_a_day_is_disabled_and_shown_to_operators(
    receiver: Receiver, training: Training, operator: Client, settings: Any
) -> None:
    settings.REMINDERS_MAX_ATTEMPTS = 1
    platform = _api(_caller("platform"))
    created = _subscribe(platform, receiver.url, ["answer.recorded"])
    receiver.statuses = [500, 500]
    for name in ("Alice", "Bruno"):
        player = Player.objects.get(name=name)
        token = answer_token(player_id=player.pk, training_id=training.pk, kind="INVITATION")
        Client().post(
            f"/api/answer-links/{token}/", '{"response": "denied"}', content_type="application/json"
        )
    _deliver()
    assert set(
        Occurrence.objects.filter(job__key__startswith="trainings-webhook-").values_list("status", flat=True)
    ) == {"failed"}
    assert subscriptions_failing_disable() == []  # failing, not yet for a day
    page = operator.get("/admin/trainings/webhooksubscription/").content.decode()
    assert "failing since" in page

    Occurrence.objects.filter(job__key__startswith="trainings-webhook-").update(
        fire_at=timezone.now() - dt.timedelta(hours=25)
    )
    assert subscriptions_failing_disable() == [created["id"]]

    (row,) = platform.get("/api/webhooks/").json()["results"]
    assert row["status"] == "disabled" and "failed for 24 h" in row["disabled_reason"]
    page = operator.get("/admin/trainings/webhooksubscription/").content.decode()
    assert "disabled: every delivery failed for 24 h" in page
    token = answer_token(
        player_id=Player.objects.get(name="Chloe").pk, training_id=training.pk, kind="INVITATION"
    )
    Client().post(f"/api/answer-links/{token}/", '{"response": "denied"}', content_type="application/json")
    assert Job.objects.filter(key__startswith="trainings-webhook-").count() == 2  # nothing more for it


def test_a_success_since_the_failures_keeps_it_active(
    receiver: Receiver, training: Training, settings: Any
) -> None:
    settings.REMINDERS_MAX_ATTEMPTS = 1
    _subscribe(_api(_caller("platform")), receiver.url, ["answer.recorded"])
    receiver.statuses = [500]
    for name in ("Alice", "Bruno"):
        player = Player.objects.get(name=name)
        token = answer_token(player_id=player.pk, training_id=training.pk, kind="INVITATION")
        Client().post(
            f"/api/answer-links/{token}/", '{"response": "denied"}', content_type="application/json"
        )
        _deliver()
    Occurrence.objects.filter(status=OccurrenceStatus.FAILED).update(
        fire_at=timezone.now() - dt.timedelta(hours=25)
    )
    assert subscriptions_failing_disable() == []
