"""The limits hold across processes: gunicorn with 4 workers on PostgreSQL, 100 requests at once.

The counts used to live in each worker's memory (80 of 100 answers through a 20 a minute limit with four
workers), or in Django's database cache, whose read-modify-write let about 40 through and whose 300
entries any 600 forged tokens pushed out. Now every count is one upsert in the service's database: exact
across workers, and a token whose signature fails makes no entry of its own.
"""

from __future__ import annotations

import datetime as dt
import http.client
import json
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from django.conf import settings

from reminders.models import RequestCount
from tests.factories import MembershipFactory, PlayerFactory, TeamFactory, training_made
from tests.ops.processes import gunicorn
from trainings.answers.links import answer_token
from trainings.models import Invitation, InvitationStatus

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

START = dt.datetime(2030, 6, 11, 16, tzinfo=dt.UTC)
AT_ONCE = 100


@pytest.fixture
def server() -> Iterator[int]:
    env = {
        "DJANGO_SECRET_KEY": settings.SECRET_KEY,  # the links this test signs are the site's
        "API_THROTTLE_ANSWER_LINK_RATE": "20/m",
        "API_THROTTLE_IP_RATE": "60/m",
        "API_NUM_PROXIES": "1",  # each test's caller comes from an address of its own
        "GUNICORN_CMD_ARGS": "--backlog=256",
    }
    with gunicorn(workers=4, extra_env=env) as port:
        yield port


def _request(port: int, method: str, path: str, address: str, body: dict[str, Any] | None = None) -> int:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        headers = {"Host": "localhost", "X-Forwarded-For": address, "Content-Type": "application/json"}
        connection.request(method, path, body=None if body is None else json.dumps(body), headers=headers)
        response = connection.getresponse()
        response.read()
        return response.status
    finally:
        connection.close()


def _at_once(calls: list[Callable[[], int]]) -> Counter[int]:
    """Every call from a thread of its own, released together; the statuses counted."""
    start = threading.Barrier(len(calls))

    def run(call: Callable[[], int]) -> int:
        start.wait()
        return call()

    with ThreadPoolExecutor(max_workers=len(calls)) as pool:
        return Counter(pool.map(run, calls))


def _link() -> tuple[str, int]:
    """An invitation's answer link (its path) and its player's id."""
    team, player = TeamFactory(), PlayerFactory()
    MembershipFactory(team=team, player=player)
    training = training_made(team, START)
    token = answer_token(player_id=player.pk, training_id=training.pk, kind="INVITATION")
    return f"/api/answer-links/{token}/", player.pk


def test_one_link_lets_exactly_its_limit_through_100_requests_at_once_over_4_workers(server: int) -> None:
    path, player = _link()
    calls = [
        (lambda i=i: _request(server, "POST", path, f"198.51.100.{i % 250}", {"response": "accepted"}))
        for i in range(AT_ONCE)
    ]  # every request from its own address: only the link's limit applies

    statuses = _at_once(calls)

    assert statuses == {200: 20, 429: AT_ONCE - 20}
    assert RequestCount.objects.get(scope="link").hits == 20
    assert Invitation.objects.get(player_id=player).status == InvitationStatus.ACCEPTED


def test_forged_tokens_make_no_count_of_their_own_and_reset_none(server: int) -> None:
    path, _ = _link()
    statuses = _at_once([(lambda: _request(server, "GET", path, "192.0.2.1")) for _ in range(25)])
    assert statuses == {200: 20, 429: 5}

    # The link's own token with its signature changed: 600 tokens this site never signed, each from one of
    # 200 addresses (3 apiece, well under the per-address limit).
    token = path.split("/")[3]
    forged = [(f"203.0.113.{i % 200}", f"/api/answer-links/{token[:-12]}{i:012d}/") for i in range(600)]
    with ThreadPoolExecutor(max_workers=16) as pool:
        answers = Counter(pool.map(lambda each: _request(server, "GET", each[1], each[0]), forged))
    assert answers == {400: 600}

    assert _request(server, "GET", path, "192.0.2.2") == 429  # the link's count stands
    assert list(RequestCount.objects.filter(scope="link").values_list("hits", flat=True)) == [20]


def test_one_address_gets_exactly_its_limit_whatever_it_sends(server: int) -> None:
    """Forged links, from one address at once: the per-address limit (60 a minute) is exact too."""
    paths = [f"/api/answer-links/forged-{i}/" for i in range(150)]
    calls = [(lambda path=path: _request(server, "GET", path, "192.0.2.66")) for path in paths]

    statuses = _at_once(calls)

    assert statuses == {400: 60, 429: 90}
    assert RequestCount.objects.get(scope="ip", ident="192.0.2.66").hits == 60
    assert not RequestCount.objects.filter(scope="link").exists()
    assert _request(server, "GET", "/api/answer-links/forged-x/", "192.0.2.67") == 400  # another address
