from __future__ import annotations

import datetime as dt
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction
from django.utils import timezone

from common.address import site_url
from delivery.models import Device
from trainings.access import coach_group_ensure
from trainings.answers.links import answer_page_link, answerable, expects_response
from trainings.models import InvitationStatus, Membership, Player, Team, Training
from trainings.planning import kinds
from trainings.planning.writes import answer_record, invitation_respond, training_create
from trainings.selectors import training_timeline

PLAYERS = [
    ("Alice", "en", "Europe/Paris"),
    ("Bruno", "fr", "Europe/Paris"),
    ("Chloe", "en", "Europe/London"),
    ("Dan", "fr", "America/Montreal"),
]

# Alice's answer to the built-in wellness check (trainings/answers/presets.py).
_WELL_RESTED = {"sleep_quality": 6, "fatigue": 2, "stress": 2, "soreness": 3}


class Command(BaseCommand):
    help = (
        "Development only (DJANGO_DEBUG=1): a demo team, a coach (coach / coach) and three trainings whose "
        "first reminders (pre, invitation, post) fire within a few minutes."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        if not settings.DEBUG:
            raise CommandError(
                "demo_trainings only runs with DJANGO_DEBUG=1 (it creates a coach / coach login)"
            )
        coach = self._coach()
        # No quiet hours (a new team's default is 22:00-07:00): the demo's reminders go at any hour.
        team, _ = Team.objects.get_or_create(
            name="Demo U15", defaults={"time_zone": "Europe/Paris", "quiet_start": None, "quiet_end": None}
        )
        team.coaches.add(coach)
        players = {}
        for name, language, zone in PLAYERS:
            player, _ = Player.objects.get_or_create(
                name=f"Demo {name}",
                defaults={"language": language, "time_zone": zone},
            )
            # One Android device each: without FCM credentials the logging provider "delivers" to it.
            Device.objects.get_or_create(
                provider="fcm",
                token=f"demo-token-{name.lower()}",
                defaults={"player": player, "platform": "android"},
            )
            Membership.objects.get_or_create(team=team, player=player)
            players[name] = player

        now = timezone.now().replace(microsecond=0)
        # The 15-min pre-questionnaire reminder in 2 minutes; Alice has already answered, so she is skipped.
        # Created 17 minutes ahead, after all its invitation instants, it sends its invitation at once; all
        # have said they come already here, so that one reaches nobody and the questionnaire is what is owed.
        # One transaction: the worker is kicked after it commits, so that invitation finds the answers.
        with transaction.atomic():
            pre = self._training(team, "Demo pre-training", start=now + dt.timedelta(minutes=17), minutes=60)
            for accepted in pre.invitations.all():
                invitation_respond(invitation=accepted, status=InvitationStatus.ACCEPTED)
            answer_record(training=pre, player=players["Alice"], phase=kinds.PRE.code, answers=_WELL_RESTED)
        # The 6-hour invitation reminder in 3 minutes; Bruno has accepted, so he is skipped.
        invitation = self._training(
            team, "Demo invitation", start=now + dt.timedelta(hours=6, minutes=3), minutes=90
        )
        invitation_respond(
            invitation=invitation.invitations.get(player=players["Bruno"]), status=InvitationStatus.ACCEPTED
        )
        # The 15-min post-questionnaire reminder in 4 minutes (the training ended 11 minutes ago).
        self._training(team, "Demo post-training", start=now - dt.timedelta(minutes=71), minutes=60)

        self.stdout.write(self.style.SUCCESS(f"Demo team {team.name!r} with {len(players)} players."))
        upcoming: list[tuple[Training, Any]] = []  # each training's scheduled reminders, soonest first
        for training in Training.objects.filter(team=team, created_at__gte=now).order_by("created_at"):
            scheduled = [e for e in training_timeline(training=training) if e.status == "scheduled"]
            first = scheduled[0] if scheduled else None
            local = first.fire_at.astimezone(training.zone) if first else None
            when = (
                f"{first.rule} at {local:%H:%M:%S %Z} ({training.time_zone})" if first else "nothing pending"
            )
            self.stdout.write(
                f"  {training.title}: next reminder {when}   "
                f"{site_url(f'/admin/trainings/training/{training.pk}/change/')}"
            )
            upcoming += [(training, entry) for entry in scheduled]
        upcoming.sort(key=lambda pair: pair[1].fire_at)
        self.stdout.write(
            "Answer as a player in one tap (the answer page, in a browser): the next reminder of that "
            "training then skips them, and its page shows the answer."
        )
        for name, player in players.items():
            owed = next(((t, e) for t, e in upcoming if _owes(player, t, e.kind)), None)
            if owed is None:
                continue
            training, entry = owed
            link = answer_page_link(player_id=player.pk, training_id=training.pk, kind=entry.kind)
            local = entry.fire_at.astimezone(training.zone)
            self.stdout.write(f"  {name}, before the {entry.rule} reminder at {local:%H:%M:%S}: {link}")
        self.stdout.write(
            "What to watch:\n"
            "  1. keep `make run` going: its worker and beat deliver the due reminders, and its push gateway "
            f"logs each push as a PUSH line (queue {settings.TRAININGS_PUSH_QUEUE}, no provider credentials "
            "needed);\n"
            f"  2. {site_url('/admin/trainings/training/')} (coach / coach sees only Demo U15): each "
            "training's page shows its player grid and its reminder timeline in Paris time."
        )

    def _coach(self) -> Any:
        user, created = get_user_model().objects.get_or_create(username="coach", defaults={"is_staff": True})
        if created:
            user.set_password("coach")
            user.save()
        user.groups.add(coach_group_ensure())
        return user

    def _training(self, team: Team, title: str, *, start: dt.datetime, minutes: int) -> Training:
        return training_create(
            team=team,
            title=title,
            start=start,
            end=start + dt.timedelta(minutes=minutes),
            time_zone=team.time_zone,
            location="Demo stadium",
        )


def _owes(player: Player, training: Training, kind: str) -> bool:
    """Whether the player still owes this kind's answer for the training (a reminder of it would reach
    them)."""
    if not answerable(kind):
        return False
    if expects_response(kind):
        return training.invitations.filter(player=player, status=InvitationStatus.PENDING).exists()
    return not training.answers.filter(player=player, phase=kind).exists()
