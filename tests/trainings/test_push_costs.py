"""What makes the gateway cheap per push must not weaken it: the APNs provider token is signed once per
lifetime (not per request) and a new one after; the HTTP/2 client indexes the repeating bearer token in
HPACK and keeps per-request values out of the table; a round's device outcomes are written with one
statement per kind, every device recorded; a header value that would break the connection fails only
its own send. Real APNs and FCM peers on loopback, the real PostgreSQL."""

from __future__ import annotations

import json
from typing import Any

import hpack
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from common.compact_json import json_compact
from common.wire.h2client import H2Client, HeaderEncoder
from delivery.channels.apns import ApnsProvider
from delivery.channels.providers import providers_from_settings
from delivery.gateway.consumer import Outcome, PushSender
from delivery.gateway.records import sends_recorded
from delivery.models import Device, PushMinute, PushSend, SendStatus
from tests.factories import DeviceFactory, PlayerFactory
from tests.peers.apns_fcm import Answer, ApnsPeer, FcmPeer
from tests.trainings.push_fixtures import message

pytestmark = pytest.mark.django_db


@pytest.fixture
def sender(apns: ApnsPeer, fcm: FcmPeer) -> Any:
    sender = PushSender(providers_from_settings())
    yield sender
    sender.close()


def _apns(sender: PushSender) -> ApnsProvider:
    provider = sender.providers.by_device["apns"]
    assert isinstance(provider, ApnsProvider)
    return provider


def test_the_apns_provider_token_is_reused_within_its_lifetime_and_signed_again_after(
    apns: ApnsPeer, sender: PushSender
) -> None:
    players = [PlayerFactory(devices=[]) for _ in range(3)]
    for n, player in enumerate(players):
        DeviceFactory(player=player, provider="apns", platform="ios", token=f"{n:064x}")
    results = sender.handle([message(f"occ.a{p.pk}", p.pk) for p in players])
    assert {r.outcome for r in results} == {Outcome.DELIVERED}
    first = {r.headers["authorization"] for r in apns.received}
    assert len(apns.received) == 3 and len(first) == 1  # one JWT for every request, checked by the peer

    results = sender.handle([message(f"occ.b{p.pk}", p.pk) for p in players])
    assert {r.headers["authorization"] for r in apns.received[3:]} == first  # still within its lifetime

    provider = _apns(sender)
    provider._jwt_at -= provider.token_seconds  # the token is now as old as its lifetime
    results = sender.handle([message(f"occ.c{p.pk}", p.pk) for p in players])
    assert {r.outcome for r in results} == {Outcome.DELIVERED}  # the peer verified the new one
    renewed = {r.headers["authorization"] for r in apns.received[6:]}
    assert len(renewed) == 1 and renewed != first


def test_an_expired_provider_token_is_signed_again_once_for_all_streams_that_carried_it(
    apns: ApnsPeer, sender: PushSender
) -> None:
    player = PlayerFactory(devices=[])
    DeviceFactory(player=player, provider="apns", platform="ios", token="ab" * 32)
    apns.script("ab" * 32, [Answer(403, "ExpiredProviderToken")])
    provider = _apns(sender)
    assert sender.handle([message("occ.1", player.pk)])[0].outcome == Outcome.RETRY
    refused = apns.received[0].headers["authorization"]
    renewed = f"bearer {provider.provider_token()}"
    assert renewed != refused
    assert sender.handle([message("occ.1", player.pk)])[0].outcome == Outcome.DELIVERED
    assert apns.received[1].headers["authorization"] == renewed
    assert f"bearer {provider.provider_token()}" == renewed  # not signed again without cause


def test_the_bearer_token_is_indexed_by_hpack_and_per_request_values_are_not() -> None:
    client = H2Client("https://api.push.example:443", per_request_headers=("apns-id",))
    encoder = HeaderEncoder()
    token = "bearer eyJhbGciOiJFUzI1NiJ9.eyJpc3MiOiJURUFNIn0.c2lnbmF0dXJl"
    headers = [
        {"authorization": token, "apns-topic": "com.example.coach", "apns-id": f"id-{n:032d}"}
        for n in range(40)
    ]
    blocks = [client._header_block(encoder, f"/3/device/{n:064x}", h, b"{}") for n, h in enumerate(headers)]
    decoder = hpack.Decoder()  # what a server reads: every field, in order, from the indexed ones too
    for n, block in enumerate(blocks):
        fields = dict(decoder.decode(block))
        assert fields[":path"] == f"/3/device/{n:064x}" and fields["apns-id"] == f"id-{n:032d}"
        assert fields["authorization"] == token and fields["content-length"] == "2"
        assert fields[":method"] == "POST" and fields[":authority"] == "api.push.example:443"
    assert token.encode() in blocks[0]
    # After the first request the token is one table reference; 40 unique paths and ids later it is still
    # in the table (they were never indexed, so they did not push it out).
    assert all(token.encode() not in block for block in blocks[1:])
    assert len(blocks[-1]) < len(blocks[0]) - len(token)
    assert all(f"{n:064x}".encode() in block for n, block in enumerate(blocks))
    names = [entry[0] for entry in encoder.dynamic_entries]
    assert b"authorization" in names and b":path" not in names and b"apns-id" not in names
    assert b"content-length" not in names


def test_pushes_of_many_trainings_leave_the_apns_hpack_table_to_the_values_that_repeat(
    apns: ApnsPeer, sender: PushSender
) -> None:
    """A storm interleaves thousands of trainings: their collapse ids and expirations are never indexed, so
    the dynamic table (which hpack walks for every header of every request) keeps only what repeats."""
    players = [PlayerFactory(devices=[]) for _ in range(30)]
    for n, player in enumerate(players):
        DeviceFactory(player=player, provider="apns", platform="ios", token=f"{n:064x}")
    bodies = [
        message(f"occ.{n}", player.pk, training=f"00000000-0000-4000-8000-{n:012d}", expires_in=600 + n)
        for n, player in enumerate(players)
    ]
    assert {r.outcome for r in sender.handle(bodies)} == {Outcome.DELIVERED}
    assert len({r.headers["apns-collapse-id"] for r in apns.received}) == 30  # each still sent
    connection = _apns(sender)._http._connection
    assert connection is not None
    entries = connection.encoder.dynamic_entries
    repeating = {b":authority", b"authorization", b"apns-topic", b"apns-push-type", b"apns-priority",
                 b"content-type"}  # fmt: skip
    assert {name for name, _ in entries} == repeating


def test_a_round_records_every_device_outcome_with_one_statement_per_kind(
    apns: ApnsPeer, fcm: FcmPeer, sender: PushSender
) -> None:
    sender.FLUSH_SECONDS = 30.0  # one recording at the end of the round (the deque is drained once)
    players = [PlayerFactory(devices=[]) for _ in range(20)]
    dead: list[str] = []
    for n, player in enumerate(players):
        DeviceFactory(player=player, provider="apns", platform="ios", token=f"{n:064x}")
        DeviceFactory(player=player, provider="fcm", platform="android", token=f"fcm-{n}")
        if n % 4 == 0:
            apns.script(f"{n:064x}", [Answer(410, "Unregistered")])
            fcm.script(f"fcm-{n}", [Answer(404, "UNREGISTERED")])
            dead += [f"{n:064x}", f"fcm-{n}"]

    with CaptureQueriesContext(connection) as queries:
        results = sender.handle([message(f"occ.{p.pk}", p.pk) for p in players])
    assert {r.outcome for r in results} == {Outcome.DELIVERED}

    statuses = dict(PushSend.objects.values_list("device__token", "status"))
    assert len(statuses) == 40  # every device has its outcome
    assert {t for t, s in statuses.items() if s == SendStatus.TOKEN_DEAD} == set(dead)
    assert {t for t, s in statuses.items() if s == SendStatus.ACCEPTED} == set(statuses) - set(dead)
    assert set(Device.objects.exclude(disabled_at=None).values_list("token", flat=True)) == set(dead)
    sql = [q["sql"] for q in queries.captured_queries]
    # (ignore_conflicts is `INSERT OR IGNORE` on SQLite, `ON CONFLICT DO NOTHING` on PostgreSQL)
    inserts = [
        s
        for s in sql
        if s.startswith(('INSERT INTO "delivery_pushsend"', 'INSERT OR IGNORE INTO "delivery_pushsend"'))
    ]
    disables = [s for s in sql if s.startswith('UPDATE "delivery_device"') and "disabled_reason" in s]
    successes = [s for s in sql if s.startswith('UPDATE "delivery_device"') and "last_success_at" in s]
    # The sends' one INSERT; the devices' stamps wait for the sender's next minute (gateway/stamps.py).
    assert len(inserts) == 1 and successes == []
    assert sender.stamps.pending() == 30  # the accepting devices, stamped later by one UPDATE
    with CaptureQueriesContext(connection) as stamping:
        assert sender.stamps.write() == 30
    assert [q["sql"] for q in stamping.captured_queries if "last_success_at" in q["sql"]] != []
    assert len(stamping.captured_queries) == 1
    assert Device.objects.filter(last_success_at__isnull=False).count() == 30
    if connection.vendor == "postgresql":  # the sends' statement is prepared once per connection
        with connection.cursor() as cursor:
            cursor.execute("SELECT statement FROM pg_prepared_statements")
            prepared = [row[0] for row in cursor.fetchall()]
        assert [p for p in prepared if p.startswith('INSERT INTO "delivery_pushsend"')]
    assert len(disables) == 2  # one per reason (APNs 410 Unregistered, FCM 404 UNREGISTERED), not per device


def test_a_round_adds_its_device_outcomes_to_the_minute_once(fcm: FcmPeer, sender: PushSender) -> None:
    """The minute's counts come from the round's answers, in the transaction that finishes the round: one
    upsert of that hot row per round, none with the commits of the sends (the recorder's, many a round)."""
    sender.FLUSH_SECONDS = 0.0  # record whatever has arrived at every turn
    players = [PlayerFactory(devices=[]) for _ in range(12)]
    for n, player in enumerate(players):
        DeviceFactory(player=player, provider="fcm", platform="android", token=f"fcm-{n}")
        if n % 3 == 0:
            fcm.script(f"fcm-{n}", [Answer(404, "UNREGISTERED")])

    with CaptureQueriesContext(connection) as queries:
        results = sender.handle([message(f"occ.{p.pk}", p.pk) for p in players])

    assert {r.outcome for r in results} == {Outcome.DELIVERED}
    sql = [q["sql"].lstrip() for q in queries.captured_queries]
    minutes = [i for i, s in enumerate(sql) if s.startswith("INSERT") and PushMinute._meta.db_table in s]
    table = PushSend._meta.db_table
    sends = [i for i, s in enumerate(sql) if s.startswith("INSERT") and f'INTO "{table}"' in s]
    assert len(minutes) == 1 and minutes[0] > sends[-1]  # with the round's finish, after its sends
    [minute] = PushMinute.objects.all()
    assert (minute.accepted, minute.not_reached, minute.standin) == (8, 4, 0)  # real FCM: no stand-in


def test_a_header_value_the_connection_cannot_carry_fails_only_its_own_send(
    apns: ApnsPeer, sender: PushSender
) -> None:
    player = PlayerFactory(devices=[])
    DeviceFactory(
        player=player, provider="apns", platform="ios", token="cd" * 32, app_id="com.example\r\nx: y"
    )
    DeviceFactory(player=player, provider="apns", platform="ios", token="ef" * 32)
    assert sender.handle([message("occ.1", player.pk)])[0].outcome == Outcome.DELIVERED
    statuses = dict(PushSend.objects.values_list("device__token", "status"))
    assert statuses == {"cd" * 32: SendStatus.FAILED, "ef" * 32: SendStatus.ACCEPTED}
    assert apns.tokens() == ["ef" * 32]  # nothing went out for the first; the connection served the second
    assert Device.objects.filter(token="cd" * 32).get().enabled  # the device stays: its app id is the fault


def test_the_apns_id_and_the_answer_link_are_what_uuid5_and_django_signing_make() -> None:
    """Both are built by hand per push (no UUID object, no serializer per link): still uuid5's string,
    still the token `signing.dumps` signs and `signing.loads` reads."""
    import time
    import uuid

    from django.core import signing

    from delivery.messages import PushMessage, Target
    from trainings.answers.links import SALT, answer_token

    for key, device_id in [("push.1", 1), ("push.é✓", 2**40), ("x" * 300, 7)]:
        push = PushMessage.from_body(message(key, 1))
        expected = uuid.uuid5(uuid.NAMESPACE_URL, f"trainings-push:{key}/{device_id}")
        assert Target(device_id, "apns", "ios", "t").send_uuid(push) == str(expected)
    training = uuid.uuid4()
    for guardian in (None, 12):
        value: list[object] = [5, training.hex, "INVITATION", "p", *([guardian] if guardian else [])]
        while True:  # the two within one second (the token carries its second)
            second = int(time.time())
            token = answer_token(
                player_id=5, training_id=str(training), kind="INVITATION", guardian_id=guardian
            )
            django_token = signing.dumps(value, salt=SALT, compress=False)
            if int(time.time()) == second:
                break
        assert token == django_token
        assert signing.loads(token, salt=SALT) == value


def test_a_round_s_keys_go_as_one_array_text_and_find_every_key_whatever_its_characters() -> None:
    """The round's look-ups (done pushes, recorded sends) send its keys as one array literal built here
    (common/lookups.py), bound to a prepared statement on PostgreSQL: quotes, backslashes, commas, braces,
    spaces, the word NULL and non-ASCII keys must each find their own row, and only it."""

    keys = ['a"b', "c\\d", "e,f", "{g}", "h i", "NULL", "", "é✓", "it's", 'j\\"k']
    done, sent = keys[:5], keys[5:]
    now = timezone.now()
    PushSend.objects.bulk_create(
        [
            *(PushSend(push_key=k, provider="", status="stale", attempts=0, recorded_at=now)
              for k in [*done, "other"]),
            *(PushSend(push_key=k, device_id=1, provider="apns", status="accepted", attempts=1,
                       recorded_at=now)
              for k in [*sent, "x"]),
        ]
    )  # fmt: skip
    with CaptureQueriesContext(connection) as queries:
        found, recorded = sends_recorded(set(keys))
    assert found == set(done)
    assert sorted(key for key, _, _ in recorded) == sorted(sent)
    assert ("ANY(" if connection.vendor == "postgresql" else " IN (") in queries[0]["sql"]
    assert sends_recorded(set()) == (set(), [])
    if connection.vendor == "postgresql":  # a key the literal cannot hold must not match nothing silently
        with pytest.raises(TypeError):
            sends_recorded({b"key"})


def test_the_request_bodies_are_what_json_dumps_makes_compact() -> None:
    """`json_compact` calls the C encoder directly (common/compact_json.py): the same bytes as
    `json.dumps(..., separators=(",", ":"))`, non-ASCII escaped, and the same refusal of what JSON has not."""
    documents: list[Any] = [
        {"message": {"token": "t",
                     "notification": {"title": "Questionnaire avant l'entraînement ✓", "body": 'a"b\\c\n'},
                     "data": {"n": 3, "x": 1.5, "ok": True, "none": None, "list": [1, "2", [3]]}}},
        {"aps": {"alert": {"title": "Ünïcode 🏃", "body": ""}, "category": "TRAINING_INVITATION"}, "k": -0.0},
        [], {}, "plain", 12,
    ]  # fmt: skip
    for document in documents:
        assert json_compact(document) == json.dumps(document, separators=(",", ":")).encode()
    with pytest.raises(TypeError, match="not JSON serializable"):
        json_compact({"when": object()})
