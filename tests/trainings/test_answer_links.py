"""Answer links: a signed token lets one player answer one kind of one training without a session; the
answer is recorded with its source, idempotently, and the next reminder skips the player. Forged,
expired, other-player and cancelled-training links are refused."""

from __future__ import annotations

import datetime as dt
import json
import urllib.error
import urllib.request
from contextlib import nullcontext
from typing import Any

import pytest
from django.core import signing
from django.db import connection
from django.test import Client
from django.utils import timezone

from reminders.models import Job, Occurrence
from tests.factories import RPE, WELLNESS, training_made
from tests.trainings.conftest import fire
from trainings.answers.following import answer_link_answer
from trainings.answers.links import SALT, answer_link_read, answer_token, answer_url
from trainings.answers.reading import LinkGone
from trainings.answers.serializers import AnswerLinkSerializer
from trainings.models import (
    AnswerSource,
    Invitation,
    InvitationStatus,
    Player,
    Push,
    PushStatus,
    QuestionnaireAnswer,
    ReminderRule,
    Team,
    Training,
    WebhookEvent,
)
from trainings.planning.writes import training_cancel
from trainings.reminding.held import push_expiry
from trainings.selectors import job_key, training_player_grid
from trainings.webhooks.events import subscribers

START = dt.datetime(2030, 6, 11, 16, tzinfo=dt.UTC)  # 18:00 in Paris


@pytest.fixture(autouse=True)
def _pushes_to_a_test_queue(push_queue: str) -> None:
    pass


@pytest.fixture
def training(team: Team) -> Training:
    return training_made(team, START, location="Stadium")


def _player(name: str) -> Player:
    return Player.objects.get(name=name)


def _path(player: Player, training: Training, kind: str) -> str:
    token = answer_token(player_id=player.pk, training_id=training.pk, kind=kind)
    return f"/api/answer-links/{token}/"


def _post(client: Client, path: str, body: dict[str, Any]) -> Any:
    return client.post(path, data=json.dumps(body), content_type="application/json")


def _occurrence(training: Training, rule: ReminderRule, fire_at: dt.datetime) -> Occurrence:
    return Occurrence.objects.get(job__key=job_key(training_id=training.pk, rule=rule), fire_at=fire_at)


def _pushed(occurrence: Occurrence) -> list[str]:
    return sorted(
        Push.objects.filter(occurrence_key=occurrence.idempotency_key, status=PushStatus.SENT).values_list(
            "player__name", flat=True
        )
    )


@pytest.mark.django_db(transaction=True)
def test_it_records_an_answer_followed_over_http_and_the_next_reminder_skips_the_player(
    live_server: Any, settings: Any, team: Team, rules: dict[str, ReminderRule]
) -> None:
    settings.TRAININGS_PUBLIC_URL = live_server.url
    from trainings.answers.links import _url_parts

    _url_parts.cache_clear()
    training = training_made(team, START)
    invitation = rules["invitation"]
    first = _occurrence(training, invitation, START - dt.timedelta(days=3))
    assert fire(first).delivered == 1
    assert _pushed(first) == ["Alice", "Bruno", "Chloe"]

    bruno = _player("Bruno")
    url = answer_url(answer_token(player_id=bruno.pk, training_id=training.pk, kind="INVITATION"))
    assert url.startswith(live_server.url)
    request = urllib.request.Request(  # noqa: S310 (the test's own server)
        url, data=b'{"response": "denied"}', headers={"Content-Type": "application/json"}, method="POST"
    )
    with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310 (the test's own server)
        body = json.loads(response.read())
    assert (body["changed"], body["answer"]["response"], body["answer"]["source"]) == (
        True, "denied", "push_action",
    )  # fmt: skip

    row = Invitation.objects.get(training=training, player=bruno)
    assert (row.status, row.response_source) == (InvitationStatus.DENIED, AnswerSource.PUSH_ACTION)
    second = _occurrence(training, invitation, START - dt.timedelta(days=2))
    assert fire(second).delivered == 1
    assert _pushed(second) == ["Alice", "Chloe"]  # the fire-time re-check skips Bruno
    _url_parts.cache_clear()


def test_get_says_what_the_link_is_for_in_the_players_language_and_zone(
    client: Client, training: Training
) -> None:
    response = client.get(_path(_player("Bruno"), training, "INVITATION"))
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["kind"] == "INVITATION"
    assert body["expects"] == "response"
    assert body["responses"] == ["accepted", "denied"]
    assert body["language"] == "fr"
    assert body["question"].startswith("Viendras-tu à Speed session")
    assert body["training"]["title"] == "Speed session"
    assert body["training"]["start_local"] == "2030-06-11T18:00:00+02:00"
    assert body["training"]["time_zone"] == "Europe/Paris"
    assert body["player"]["name"] == "Bruno"
    assert body["answer"] is None
    assert body["closes_at"] == "2030-06-11T16:00:00Z"


def test_a_questionnaire_link_records_the_answers_idempotently(client: Client, training: Training) -> None:
    path = _path(_player("Alice"), training, "PRE")
    first = _post(client, path, {"answers": {"sleep_quality": 7, "fatigue": 2, "stress": 2, "soreness": 2}})
    assert first.status_code == 200, first.content
    assert first.json()["changed"] is True
    answer = QuestionnaireAnswer.objects.get(training=training, player__name="Alice", phase="PRE")
    assert (answer.answers, answer.source) == (
        {"sleep_quality": 7, "fatigue": 2, "stress": 2, "soreness": 2},
        AnswerSource.PUSH_ACTION,
    )

    again = _post(client, path, {"answers": {"sleep_quality": 7, "fatigue": 2, "stress": 2, "soreness": 2}})
    assert again.json()["changed"] is False
    assert QuestionnaireAnswer.objects.get(pk=answer.pk).answered_at == answer.answered_at  # untouched

    changed = _post(
        client,
        path,
        {"answers": {"sleep_quality": 6, "fatigue": 1, "stress": 1, "soreness": 1}, "source": "app"},
    )
    assert changed.json()["changed"] is True
    answer.refresh_from_db()
    assert (answer.answers, answer.source) == (
        {"sleep_quality": 6, "fatigue": 1, "stress": 1, "soreness": 1},
        AnswerSource.APP,
    )
    assert client.get(path).json()["answer"]["answers"] == {
        "sleep_quality": 6,
        "fatigue": 1,
        "stress": 1,
        "soreness": 1,
    }


def test_an_invitation_answer_is_idempotent_and_may_change_while_open(
    client: Client, training: Training
) -> None:
    path = _path(_player("Alice"), training, "INVITATION")
    assert _post(client, path, {"response": "accepted"}).json()["changed"] is True
    at = Invitation.objects.get(training=training, player__name="Alice").responded_at
    assert _post(client, path, {"response": "accepted"}).json()["changed"] is False
    assert Invitation.objects.get(training=training, player__name="Alice").responded_at == at
    assert _post(client, path, {"response": "denied"}).json()["answer"]["response"] == "denied"
    assert Invitation.objects.get(training=training, player__name="Alice").status == InvitationStatus.DENIED


def test_the_body_is_the_documented_shape_and_a_post_costs_two_statements(
    client: Client, training: Training, django_assert_num_queries: Any, settings: Any
) -> None:
    """The view builds AnswerLinkSerializer's JSON without running the serializer (the per-request
    cost): both must agree. On PostgreSQL a POST is counted under the per-address and the per-link limit
    in one statement, and reads the link's target and records the answer in another, whatever the
    answer's history. Who subscribes to answers is read once per TRAININGS_WEBHOOK_CACHE_SECONDS (5 s by
    default, 0 in the other tests): read here before the count, as a process has."""
    settings.TRAININGS_WEBHOOK_CACHE_SECONDS = 60
    subscribers(WebhookEvent.ANSWER_RECORDED)
    for kind, body in (("INVITATION", {"response": "denied"}), ("PRE", {"answers": WELLNESS})):
        path = _path(_player("Alice"), training, kind)
        client.get(path)  # as an app does first: this process learns the questions it checks a POST against
        for _ in range(2):  # a new answer, then the same one again (unchanged)
            # SQLite (the embedded default) records through the ORM: only PostgreSQL's count is pinned.
            counted = django_assert_num_queries(2) if connection.vendor == "postgresql" else nullcontext()
            with counted:
                posted = _post(client, path, body)
            assert posted.status_code == 200, posted.content
            assert posted.json() == AnswerLinkSerializer(posted.json()).data
        shown = client.get(path).json()
        assert shown == AnswerLinkSerializer(shown).data
        assert shown["answer"]["at"] == posted.json()["answer"]["at"]
        assert shown["answer"]["at"].endswith("Z")


@pytest.mark.parametrize(
    ("kind", "body", "field"),
    [
        ("INVITATION", {}, "response"),
        ("INVITATION", {"response": "maybe"}, "response"),
        ("INVITATION", {"answers": {}}, "answers"),
        ("PRE", {"response": "accepted"}, "response"),
        ("PRE", {"answers": [1, 2]}, "answers"),
        ("POST", {}, "answers"),
        ("PRE", {"answers": {}, "source": "admin"}, "source"),
    ],
)
def test_a_bad_body_is_a_400_naming_the_field(
    client: Client, training: Training, kind: str, body: dict[str, Any], field: str
) -> None:
    response = _post(client, _path(_player("Alice"), training, kind), body)
    assert response.status_code == 400
    assert field in response.json()
    assert not QuestionnaireAnswer.objects.exists()
    assert not Invitation.objects.exclude(status=InvitationStatus.PENDING).exists()


def test_a_tampered_or_foreign_token_is_a_400_that_says_nothing_more(
    client: Client, training: Training
) -> None:
    alice, bruno = _player("Alice"), _player("Bruno")
    token = answer_token(player_id=alice.pk, training_id=training.pk, kind="INVITATION")
    _payload, rest = token.split(":", 1)
    # The same signature over another player: the signature no longer matches.
    other = signing.dumps([bruno.pk, training.pk.hex, "INVITATION", "p"], salt=SALT, compress=False)
    forged = f"{other.split(':', 1)[0]}:{rest}"
    candidates = [
        forged,
        token[:-2] + ("AA" if not token.endswith("AA") else "BB"),
        signing.dumps([alice.pk, training.pk.hex, "INVITATION", "p"], salt="another.purpose"),
        signing.dumps([alice.pk, training.pk.hex, "INVITATION", "p"], key="not-our-key", salt=SALT),
        "garbage",
    ]
    for bad in candidates:
        for response in (client.get(f"/api/answer-links/{bad}/"),
                         _post(client, f"/api/answer-links/{bad}/", {"response": "accepted"})):  # fmt: skip
            assert response.status_code == 400, bad
            assert response.json() == {"detail": "This is not a valid answer link."}
    assert not Invitation.objects.exclude(status=InvitationStatus.PENDING).exists()


def test_a_link_answers_for_its_own_player_training_and_kind_only(
    client: Client, training: Training, team: Team
) -> None:
    other_training = training_made(team, START + dt.timedelta(days=1))
    path = _path(_player("Alice"), training, "INVITATION")
    assert _post(client, path, {"response": "accepted"}).status_code == 200
    # Only Alice's invitation to this training changed: not her other training, not Bruno, not PRE.
    changed = Invitation.objects.exclude(status=InvitationStatus.PENDING)
    assert list(changed.values_list("training_id", "player__name")) == [(training.pk, "Alice")]
    assert Invitation.objects.get(training=other_training, player__name="Alice").status == "PENDING"
    assert not QuestionnaireAnswer.objects.exists()


def test_a_player_no_longer_on_the_list_gets_a_410(client: Client, training: Training) -> None:
    chloe = _player("Chloe")
    Invitation.objects.filter(training=training, player=chloe).delete()
    response = _post(client, _path(chloe, training, "INVITATION"), {"response": "accepted"})
    assert (response.status_code, response.json()["code"]) == (410, "not_invited")


def test_a_cancelled_training_refuses_its_links_with_a_410(client: Client, training: Training) -> None:
    path = _path(_player("Alice"), training, "PRE")
    training_cancel(training=training)
    for response in (client.get(path), _post(client, path, {"answers": WELLNESS})):
        assert (response.status_code, response.json()["code"]) == (410, "cancelled")
    assert not QuestionnaireAnswer.objects.exists()


def test_a_link_expires_when_its_kinds_window_closes(client: Client, team: Team, settings: Any) -> None:
    now = timezone.now()
    training = training_made(team, now + dt.timedelta(minutes=30), minutes=60)
    alice = _player("Alice")
    pre, post = _path(alice, training, "PRE"), _path(alice, training, "POST")
    assert client.get(pre).status_code == 200
    Training.objects.filter(pk=training.pk).update(
        start=now - dt.timedelta(minutes=1), end=now + dt.timedelta(minutes=59)
    )
    assert (client.get(pre).status_code, client.get(pre).json()["code"]) == (410, "closed")
    assert client.get(post).status_code == 200  # the post-training questionnaire is still open
    settings.TRAININGS_POST_QUESTIONNAIRE_HOURS = 1
    Training.objects.filter(pk=training.pk).update(
        start=now - dt.timedelta(hours=3), end=now - dt.timedelta(hours=2)
    )
    assert _post(client, post, {"answers": {}}).status_code == 410
    deleted = _path(alice, training, "INVITATION")
    Training.objects.filter(pk=training.pk).delete()
    assert (client.get(deleted).status_code, client.get(deleted).json()["code"]) == (410, "gone")


def test_a_link_signed_with_a_previous_key_works_while_that_key_is_a_fallback(
    client: Client, training: Training, settings: Any
) -> None:
    path = _path(_player("Alice"), training, "INVITATION")
    settings.SECRET_KEY, settings.SECRET_KEY_FALLBACKS = "the-new-key-" * 4, [settings.SECRET_KEY]
    assert client.get(path).status_code == 200
    settings.SECRET_KEY_FALLBACKS = []
    assert client.get(path).status_code == 400


def test_following_one_link_too_often_is_throttled(client: Client, training: Training, settings: Any) -> None:
    settings.API_THROTTLE_ANSWER_LINK_RATE = "3/m"
    path = _path(_player("Alice"), training, "INVITATION")
    assert [client.get(path).status_code for _ in range(4)] == [200, 200, 200, 429]
    assert client.get(_path(_player("Bruno"), training, "INVITATION")).status_code == 200  # another link


def test_the_coachs_grid_says_how_and_when_each_answer_came(client: Client, training: Training) -> None:
    alice = _player("Alice")
    sent = timezone.now() - dt.timedelta(minutes=3)
    Push.objects.create(
        key="k.1", occurrence_key="k", training=training, player=alice, kind="INVITATION", offset="60m",
        language="en", title="t", body="b", fire_at=sent, status=PushStatus.SENT, sent_at=sent,
    )  # fmt: skip
    assert _post(client, _path(alice, training, "INVITATION"), {"response": "accepted"}).status_code == 200
    row = next(r for r in training_player_grid(training=training) if r.player == "Alice")
    assert row.invitation_how == "from the notification, 3 min after the 60-min reminder"


@pytest.mark.parametrize("kind", ["INVITATION", "PRE"])
@pytest.mark.parametrize(
    "body",
    [
        {"response": "accepted"}, {"response": "denied"}, {"response": "maybe"}, {"response": True},
        {"answers": {"sleep": 7}}, {"answers": {}}, {"answers": [1]}, {"answers": "x"},
        {"answers": {"k": 1}, "source": "app"}, {"response": "denied", "source": "app"},
        {"answers": {}, "source": "admin"}, {"response": "accepted", "other": 1}, {}, [],
        {"answers": {str(i): i for i in range(101)}},
    ],
)  # fmt: skip
def test_the_views_plain_bodies_are_what_the_input_serializer_makes_of_them(kind: str, body: Any) -> None:
    """The view reads the common bodies without instantiating AnswerLinkInputSerializer (its per-request
    cost): what it accepts, the serializer accepts with the same values; the rest goes to the serializer."""
    from trainings.answers.serializers import AnswerLinkInputSerializer
    from trainings.answers.views import _plain_input

    serializer = AnswerLinkInputSerializer(data=body, context={"kind": kind})
    plain = _plain_input(body, kind)
    if plain is not None:
        assert serializer.is_valid(), serializer.errors
        assert plain == dict(serializer.validated_data)


@pytest.mark.postgres  # the prepared statements and their own connection check are PostgreSQL's path
@pytest.mark.django_db(transaction=True)
def test_a_kept_connection_that_died_while_idle_is_replaced_without_a_health_check(
    client: Client, training: Training, settings: Any
) -> None:
    """No `SELECT 1` per answer: the link's first statement is the check, and a connection the server
    ended between requests is replaced and the answer recorded, as Django's health check would have."""
    settings.DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
    path = _path(_player("Alice"), training, "INVITATION")
    assert _post(client, path, {"response": "accepted"}).status_code == 200
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        old_backend = cursor.fetchone()[0]
    from django.db import connections

    killer = connections.create_connection("default")
    with killer.cursor() as cursor:
        cursor.execute("SELECT pg_terminate_backend(%s)", [old_backend])
    killer.close()
    connection.health_check_enabled, connection.health_check_done = True, False  # a new request's state
    response = _post(client, path, {"response": "denied"})
    assert response.status_code == 200, response.content
    assert response.json()["changed"] is True
    assert Invitation.objects.get(training=training, player__name="Alice").status == InvitationStatus.DENIED
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        assert cursor.fetchone()[0] != old_backend


def test_a_late_decline_through_a_link_alerts_the_coaches_when_the_team_asks(
    client: Client, team: Team, django_capture_on_commit_callbacks: Any
) -> None:
    """The link reads the team's late-decline setting with its target: a team that asks gets the alert's
    job, one that does not costs no query for it."""
    from trainings.digest.alerts import decline_alert_key

    soon = training_made(team, timezone.now().replace(microsecond=0) + dt.timedelta(hours=2))
    alice, bruno = _player("Alice"), _player("Bruno")
    with django_capture_on_commit_callbacks(execute=True):
        assert _post(client, _path(bruno, soon, "INVITATION"), {"response": "denied"}).status_code == 200
    assert not Job.objects.filter(key=decline_alert_key(training_id=soon.pk, player_id=bruno.pk)).exists()
    Team.objects.filter(pk=team.pk).update(decline_alert_within="3h")
    with django_capture_on_commit_callbacks(execute=True):
        assert _post(client, _path(alice, soon, "INVITATION"), {"response": "denied"}).status_code == 200
    assert Job.objects.filter(key=decline_alert_key(training_id=soon.pk, player_id=alice.pk)).exists()


@pytest.mark.parametrize(
    ("kind", "values"),
    [("INVITATION", {"response": "denied"}), ("PRE", {"answers": WELLNESS}), ("POST", {"answers": RPE})],
)
def test_a_post_is_refused_from_the_instant_its_window_closes_and_writes_nothing(
    training: Training, kind: str, values: dict[str, Any], settings: Any
) -> None:
    """Opening and recording are one statement on PostgreSQL, which checks the window itself: it must
    close at the same instant as the kind's `closes` says, to the microsecond, and write nothing then."""
    settings.TRAININGS_POST_QUESTIONNAIRE_HOURS = 2
    link = answer_link_read(answer_token(player_id=_player("Alice").pk, training_id=training.pk, kind=kind))
    closes = push_expiry(training=training, kind=kind)
    assert closes == (training.end + dt.timedelta(hours=2) if kind == "POST" else training.start)
    with pytest.raises(LinkGone) as refused:
        answer_link_answer(link, **values, now=closes)
    assert refused.value.code == "closed"
    assert not QuestionnaireAnswer.objects.exists()
    assert not Invitation.objects.exclude(status=InvitationStatus.PENDING).exists()
    target, recorded = answer_link_answer(link, **values, now=closes - dt.timedelta(microseconds=1))
    assert recorded.changed and target.closes_at == closes
    assert QuestionnaireAnswer.objects.exists() or Invitation.objects.filter(status=InvitationStatus.DENIED)


def test_a_post_after_the_training_moved_later_records_and_one_on_a_deleted_training_is_gone(
    client: Client, training: Training
) -> None:
    path = _path(_player("Alice"), training, "INVITATION")
    day = dt.timedelta(days=1)
    Training.objects.filter(pk=training.pk).update(start=START + day, end=training.end + day)
    posted = _post(client, path, {"response": "accepted"})
    assert posted.status_code == 200
    assert posted.json()["closes_at"] == "2030-06-12T16:00:00Z"
    Training.objects.filter(pk=training.pk).delete()
    assert (_post(client, path, {"response": "denied"}).json()["code"]) == "gone"


def test_posting_one_link_too_often_is_throttled(client: Client, training: Training, settings: Any) -> None:
    settings.API_THROTTLE_ANSWER_LINK_RATE = "2/m"
    path = _path(_player("Alice"), training, "INVITATION")
    statuses = [_post(client, path, {"response": r}).status_code for r in ("accepted", "denied", "accepted")]
    assert statuses == [200, 200, 429]
    assert Invitation.objects.get(training=training, player__name="Alice").status == InvitationStatus.DENIED


def test_a_post_answers_json_whatever_it_accepts_and_takes_json_only(
    client: Client, training: Training
) -> None:
    """The link's view has one parser and one renderer (DRF's own hooks, no path of its own): any Accept
    gets the same JSON answer, and a body that is not JSON is refused (415) and records nothing."""
    path = _path(_player("Alice"), training, "INVITATION")
    assert _post(client, path, {"response": "accepted"}).json()["changed"] is True
    body = json.dumps({"response": "accepted"})
    answers = [
        client.post(path, data=body, content_type="application/json", headers=headers)
        for headers in ({}, {"Accept": "*/*"}, {"Accept": "application/json, text/plain;q=0.5"},
                        {"Accept": "text/html"})
    ]  # fmt: skip
    assert [a.status_code for a in answers] == [200, 200, 200, 200]
    assert answers[0].json()["changed"] is False
    assert len({a.content for a in answers}) == 1
    for name in ("Content-Type", "Allow"):
        assert len({a[name] for a in answers}) == 1, name
    assert answers[0]["Content-Type"] == "application/json"
    form = client.post(path, data={"response": "denied"})
    assert form.status_code == 415, form.content
    assert Invitation.objects.get(training=training, player__name="Alice").status == InvitationStatus.ACCEPTED


@pytest.mark.parametrize(
    "raw", ['{"answers": {"sleep": NaN}}', '{"answers": {"sleep": "\\ud800"}}', '{"answers": {"a": 1}', ""]
)
def test_a_body_drfs_json_parser_refuses_is_still_a_400(client: Client, training: Training, raw: str) -> None:
    response = client.post(
        _path(_player("Alice"), training, "PRE"), data=raw, content_type="application/json"
    )
    assert response.status_code == 400, response.content
    assert not QuestionnaireAnswer.objects.exists()


def test_an_answer_link_skips_the_browser_middleware_but_not_the_limits_or_security_headers(
    client: Client, training: Training, settings: Any, django_user_model: Any
) -> None:
    """The link's route is called past sessions, CSRF and authentication (common/http/session_free.py):
    a signed-in browser's POST without a CSRF token is answered and its session is never touched, while
    the per-address limit, the security headers and X-Frame-Options still apply."""
    client.force_login(django_user_model.objects.create_user("coach", password="x"))
    settings.API_THROTTLE_RATES = {"token": "1000000/s", "ip": "2/m"}
    path = _path(_player("Alice"), training, "INVITATION")
    answers = [_post(client, path, {"response": r}) for r in ("accepted", "denied", "accepted")]
    assert [a.status_code for a in answers] == [200, 200, 429]
    assert answers[0].json()["answer"]["response"] == "accepted"
    for header, value in (("X-Frame-Options", "DENY"), ("X-Content-Type-Options", "nosniff")):
        assert answers[0][header] == value
    assert not answers[0].cookies  # no session saved, no CSRF cookie set
    assert not hasattr(answers[0].wsgi_request, "user")  # AuthenticationMiddleware never saw it
    assert Invitation.objects.get(training=training, player__name="Alice").status == InvitationStatus.DENIED


def test_a_path_under_the_links_prefix_that_is_no_link_goes_through_the_whole_stack(client: Client) -> None:
    response = client.get("/api/answer-links/")
    assert response.status_code == 404
    assert response["Content-Type"] == "application/json"
