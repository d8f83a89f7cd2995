"""The rates every gateway shares through the database (common/rates.py): a minute's quota handed out
second by second, what one process took not taken again by another, a pause for everyone. On the
database the suite runs on (PostgreSQL or SQLite), with the clock given, so nothing here is timed."""

from __future__ import annotations

import pytest

from common.rates import DatabaseRates, LocalRates, Rates, allowance

pytestmark = pytest.mark.django_db

T = 1_800_000_000.0  # a Unix time at the start of a minute (divisible by 60)


def test_the_seconds_of_a_minute_add_up_to_the_quota() -> None:
    for per_minute in (1, 59, 60, 61, 600, 1_200, 600_000, 1_000_003):
        shares = [allowance(per_minute, int(T) + k) for k in range(60)]
        assert sum(shares) == per_minute and max(shares) - min(shares) <= 1


@pytest.mark.parametrize("make", [DatabaseRates, LocalRates])
def test_two_takers_share_one_second_and_a_new_second_starts_afresh(make: type[Rates]) -> None:
    one, other = make(), make()  # (two gateways: separate objects, one row)
    p, q = f"fcm:share-{make.__name__}", f"fcm:other-{make.__name__}"
    assert one.take(p, 600, 6, T) == (6, 0.0)  # 10 a second
    assert other.take(p, 600, 6, T + 0.5) == (4, 0.0)
    granted, wait = one.take(p, 600, 1, T + 0.75)
    assert granted == 0 and wait == pytest.approx(0.25)
    assert other.take(p, 600, 100, T + 1.0) == (10, 0.0)
    assert one.take(q, 600, 3, T + 1.0) == (3, 0.0)  # another project, its own quota


@pytest.mark.parametrize("make", [DatabaseRates, LocalRates])
def test_a_pause_holds_every_taker_until_it_ends(make: type[Rates]) -> None:
    one, other = make(), make()
    p = f"fcm:pause-{make.__name__}"
    one.take(p, 600, 1, T)
    one.pause(p, T + 30)
    one.pause(p, T + 10)  # an earlier end does not shorten it
    granted, wait = other.take(p, 600, 5, T + 2)
    assert granted == 0 and wait == pytest.approx(28)
    assert other.take(p, 600, 5, T + 30) == (5, 0.0)
