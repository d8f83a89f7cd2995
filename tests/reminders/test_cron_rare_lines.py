"""Crontabs that fire only years from now are accepted; one that can never fire is refused.

A line such as ``15 */5 */7 */4 SUN`` (Debian ANDs the day fields because one starts with a star, so: the
1st, 8th, 15th, 22nd or 29th of January, May or September that is a Sunday) first fires on 2030-09-01. The
fires expected here come from the independent Debian field matcher in `test_cron_fields`, and the
schedule is created through the API from today's clock.
"""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from reminders.schedules.cron import ExpressionError, timeline_for, upcoming
from tests.reminders.test_cron_fields import debian_fires

pytestmark = pytest.mark.django_db

# Each first fires 2029-2037 from late 2026, most of them more than five years after 2025-01-01.
RARE = [
    "15 */5 */7 */4 SUN",  # 2030-09-01
    "0 12 */28 2 SUN",  # 2032-02-01 (the 1st or the 29th of February on a Sunday)
    "0 0 */14 2 SAT",  # 2031-02-01
    "0 0 */7 MAR TUE",  # 2033-03-01
    "0 0 */7 OCT-NOV SAT",  # 2031-11-01
    "0 0 */7 JUN MON",  # 2037-06-01
    "0 0 29 2 */7",  # the 29th of February on a Sunday: 2032, then 2060
]


def _body(expression: str, zone: str) -> dict[str, object]:
    return {
        "key": "rare",
        "expression": expression,
        "timezone": zone,
        "callback": {"type": "rabbitmq", "data": {"queue": "rare", "payload": {}}},
    }


@pytest.mark.parametrize("expression", RARE)
def test_it_accepts_a_line_that_fires_only_years_from_now(api: APIClient, expression: str) -> None:
    now = timezone.now()
    expected = debian_fires(expression, after=now, until=now + dt.timedelta(days=366 * 40), count=2)
    assert expected, "the oracle finds the line's fires"
    response = api.post("/api/schedules/", _body(expression, "UTC"), format="json")
    assert response.status_code == 201, response.json()
    assert dt.datetime.fromisoformat(response.json()["next_fire_at"]) == expected[0]
    preview = api.get("/api/schedules/rare/preview/?count=2").json()
    assert [dt.datetime.fromisoformat(p["utc"]) for p in preview["fires"]] == expected


def test_the_29th_of_february_on_a_sunday_comes_round_after_28_years() -> None:
    timeline = timeline_for("0 0 29 2 */7", zone="UTC", anchor=timezone.now(), fires_after=timezone.now())
    fires = upcoming(timeline, after=dt.datetime(2026, 11, 26, tzinfo=dt.UTC), count=2)
    assert fires == [dt.datetime(2032, 2, 29, tzinfo=dt.UTC), dt.datetime(2060, 2, 29, tzinfo=dt.UTC)]


def test_a_rare_line_follows_its_zone(api: APIClient) -> None:
    response = api.post("/api/schedules/", _body("15 */5 */7 */4 SUN", "Europe/Paris"), format="json")
    assert response.status_code == 201, response.json()
    # 2030-09-01 00:15 in Paris (summer time, UTC+2).
    assert dt.datetime.fromisoformat(response.json()["next_fire_at"]) == dt.datetime(
        2030, 8, 31, 22, 15, tzinfo=dt.UTC
    )


@pytest.mark.parametrize(
    "expression",
    [
        "0 0 30 2 *",  # February has no 30th: cronsim's parse refuses it without a search
        "0 0 31 4,6,9,11 *",
        "0 0 */8 * MON#5",  # the 1st, 9th, 17th or 25th is never a month's fifth Monday: found by the search
    ],
)
def test_a_line_that_never_fires_is_refused(api: APIClient, expression: str) -> None:
    response = api.post("/api/schedules/", _body(expression, "Europe/Paris"), format="json")
    assert response.status_code == 400
    assert list(response.json()) == ["expression"]
    with pytest.raises(ExpressionError):
        timeline_for(expression, zone="UTC", anchor=timezone.now(), fires_after=timezone.now())
