"""The analytics report exactly what a constructed questionnaire's players did (tests/trainings/
analytics_data.py): per offset, per player, for a team and for every team, and after incremental refreshes.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.utils import timezone

from tests.factories import QuestionnaireAnswerFactory, TeamFactory, UserFactory
from tests.trainings.analytics_data import (
    EXPECTED,
    EXPECTED_PLAYERS,
    EXPECTED_UNREMINDED,
    known_training,
)
from trainings.analytics.figures import Scope, effectiveness, players
from trainings.analytics.summary import local_day, summaries_rebuild, summaries_refresh
from trainings.models import OffsetDay, Player, Team

pytestmark = [pytest.mark.django_db]


@pytest.fixture
def start() -> dt.datetime:
    """Two days ago at 18:00 Paris time: well inside the pushes' retention."""
    day = timezone.localdate() - dt.timedelta(days=2)
    return dt.datetime.combine(day, dt.time(17, 0), tzinfo=dt.UTC)


def _figures(scope: Scope, day: dt.date) -> dict[str, tuple[Any, ...]]:
    result = effectiveness(scope=scope, since=day, until=day)
    return {
        row.offset: (row.figures.sent, row.figures.reached, row.figures.answered, row.figures.within_15,
                     row.figures.within_60, row.figures.in_window, row.median[0] if row.median else None)
        for row in result.offsets
    }  # fmt: skip


def test_it_reports_each_offset_as_constructed(start: dt.datetime) -> None:
    team = TeamFactory()
    training = known_training(team, start)
    day = local_day(training)
    summaries_rebuild(since=day, until=day)

    assert _figures(Scope((team,)), day) == EXPECTED
    result = effectiveness(scope=Scope((team,)), since=day, until=day)
    assert [row.offset for row in result.offsets] == ["90m", "75m", "60m", "45m", "30m", "15m"]
    assert [row.last for row in result.offsets] == [False] * 5 + [True]
    assert [(row.kind, row.figures.answered) for row in result.unreminded] == [("PRE", EXPECTED_UNREMINDED)]
    by_offset = {row.offset: row for row in result.offsets}
    assert by_offset["90m"].answer_rate == 2 / 7
    assert by_offset["90m"].within_15_rate == 1 / 7
    assert by_offset["75m"].reached_rate == 5 / 7
    assert by_offset["15m"].in_window_rate == 1 / 3
    # The curve: within 2 min (inclusive, like "within 15 min") one of 90's seven reached reminders was
    # answered, within 40 min two.
    curve = dict(by_offset["90m"].curve())
    assert (curve[1], curve[2], curve[39], curve[40]) == (0, 1 / 7, 1 / 7, 2 / 7)


def test_it_reports_each_player_as_constructed(start: dt.datetime) -> None:
    team = TeamFactory()
    day = local_day(known_training(team, start))
    summaries_rebuild(since=day, until=day)

    rows = players(scope=Scope((team,)), since=day, until=day)
    got = {
        row.name: (row.figures.before_reminder, row.figures.after_reminder, row.figures.after_last,
                   row.figures.never)
        for row in rows
    }  # fmt: skip
    assert got == EXPECTED_PLAYERS
    assert rows[0].late_or_never_rate == 1.0  # the least responsive first
    assert {row.name for row in rows[:3]} == {"Cleo", "Eva", "Ida"}


def test_every_team_rows_are_the_sum_of_the_teams(start: dt.datetime) -> None:
    first, second = TeamFactory(), TeamFactory()
    day = local_day(known_training(first, start))
    known_training(second, start, prefix="B-")
    summaries_rebuild(since=day, until=day)

    doubled = {
        offset: tuple(n * 2 if i < 6 else n for i, n in enumerate(row)) for offset, row in EXPECTED.items()
    }
    assert _figures(Scope(None), day) == doubled
    assert _figures(Scope((first, second)), day) == doubled
    # Rebuilding again replaces, never adds.
    summaries_rebuild(since=day, until=day)
    assert _figures(Scope(None), day) == doubled
    assert OffsetDay.objects.filter(team=None, day=day).count() == 7  # six offsets and the unreminded row


def test_a_refresh_takes_in_an_answer_given_since(start: dt.datetime) -> None:
    team = TeamFactory()
    training = known_training(team, start)
    day = local_day(training)
    summaries_rebuild(since=day, until=day)
    summaries_refresh(now=timezone.now())

    # Cleo answers now (after the window): the 15m reminder gets the credit, outside the window.
    cleo = Player.objects.get(name="Cleo")
    QuestionnaireAnswerFactory(training=training, player=cleo, phase="PRE", answered_at=timezone.now())
    assert summaries_refresh(now=timezone.now() + dt.timedelta(seconds=1)) == 1

    sent, reached, answered, w15, w60, in_window, _ = _figures(Scope((team,)), day)["15m"]
    assert (sent, reached, answered, w15, w60, in_window) == (3, 3, 3, 1, 2, 1)
    assert _figures(Scope(None), day)["15m"][:6] == (3, 3, 3, 1, 2, 1)
    # Looked at again while within the look-back for late device sends, then never again.
    summaries_refresh(now=timezone.now() + dt.timedelta(hours=1))
    assert summaries_refresh(now=timezone.now() + dt.timedelta(hours=2)) == 0
    assert _figures(Scope(None), day)["15m"][:6] == (3, 3, 3, 1, 2, 1)


def test_days_past_the_pushes_retention_are_kept_as_they_are(start: dt.datetime, settings: Any) -> None:
    team = TeamFactory()
    day = local_day(known_training(team, start))
    summaries_rebuild(since=day, until=day)
    settings.TRAININGS_PUSH_RETENTION_DAYS = 1  # the pushes of that day would be gone by now

    with pytest.raises(ValueError, match="no pushes left"):
        summaries_rebuild(since=day, until=day)
    Team.objects.filter(pk=team.pk)  # the rows are still there, unchanged
    assert _figures(Scope((team,)), day) == EXPECTED


def test_a_coach_sees_only_their_teams(start: dt.datetime) -> None:
    coach = UserFactory(is_staff=True)
    mine, other = TeamFactory(coaches=[coach]), TeamFactory()
    day = local_day(known_training(mine, start))
    known_training(other, start, prefix="B-")
    summaries_rebuild(since=day, until=day)

    from trainings.selectors import teams_visible_to

    scope = Scope(tuple(teams_visible_to(coach)))
    assert _figures(scope, day) == EXPECTED
    assert {row.name for row in players(scope=scope, since=day, until=day)} == set(EXPECTED_PLAYERS)


def test_the_rebuild_command_fills_the_days_still_kept(start: dt.datetime) -> None:
    from io import StringIO

    from django.core.management import call_command

    team = TeamFactory()
    day = local_day(known_training(team, start))
    out = StringIO()
    call_command("analytics_rebuild", stdout=out)
    assert "1 team day(s) recomputed" in out.getvalue()
    assert _figures(Scope((team,)), day) == EXPECTED


def test_a_reminder_to_a_player_and_their_guardian_counts_once(start: dt.datetime) -> None:
    """The player's phone has no device; their mother's phone gets the 90 min reminder at its instant and
    she answers for him 6 minutes later: one reminder, reached, answered within 15 minutes."""
    from delivery.models import PushSend
    from trainings.models import Guardian, Guardianship, Push, QuestionnaireAnswer, ReminderRule, Training

    team = TeamFactory()
    end = start + dt.timedelta(hours=1)
    training = Training.objects.create(
        team=team, title="Youth", start=start, end=end, time_zone="Europe/Paris"
    )
    player = Player.objects.create(name="Leo")
    mother = Guardian.objects.create(name="Leo's mother")
    Guardianship.objects.create(guardian=mother, player=player, relation="mother")
    rule = ReminderRule.objects.get(slug="pre-questionnaire")
    fire = start - dt.timedelta(minutes=90)
    for guardian, status in ((None, "no_device"), (mother, "accepted")):
        push = Push.objects.create(
            key=f"k-{guardian}", occurrence_key="o", training=training, player=player, guardian=guardian,
            rule=rule, kind="PRE", offset="90m", language="en", title="t", body="b", fire_at=fire,
            expires_at=start, status="sent", sent_at=fire,
        )  # fmt: skip
        PushSend.objects.create(push_key=push.key, player_id=player.pk, provider="fcm", status=status,
                                recorded_at=fire)  # fmt: skip
    QuestionnaireAnswer.objects.create(training=training, player=player, phase="PRE", answered_by=mother,
                                       answered_at=fire + dt.timedelta(minutes=6))  # fmt: skip
    day = local_day(training)
    summaries_rebuild(since=day, until=day)

    assert _figures(Scope((team,)), day) == {"90m": (1, 1, 1, 1, 1, 1, 5)}  # (5, 6] min


def test_a_moved_training_leaves_no_figures_on_its_old_day(start: dt.datetime) -> None:
    team = TeamFactory()
    training = known_training(team, start)
    old_day = local_day(training)
    summaries_rebuild(since=old_day, until=old_day)
    summaries_refresh(now=timezone.now())

    training.start += dt.timedelta(days=1)
    training.end += dt.timedelta(days=1)
    training.save()
    summaries_refresh(now=timezone.now() + dt.timedelta(seconds=1))

    new_day = old_day + dt.timedelta(days=1)
    assert _figures(Scope((team,)), old_day) == {}
    assert _figures(Scope(None), old_day) == {}
    # The answers now come a day earlier relative to the start: the counts hold, the window flags may not.
    moved = {offset: row[:3] for offset, row in EXPECTED.items()}
    assert {offset: row[:3] for offset, row in _figures(Scope((team,)), new_day).items()} == moved
    assert {offset: row[:3] for offset, row in _figures(Scope(None), new_day).items()} == moved
