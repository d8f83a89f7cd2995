"""factory_boy factories for every app, in one place."""

from __future__ import annotations

import datetime as dt
from typing import Any

import factory
from django.contrib.auth import get_user_model
from django.utils import timezone

from delivery.models import Device
from reminders.models import CallbackType, Job, Occurrence, QueueGrant, Schedule, ThrottlePolicy
from trainings.models import (
    Guardian,
    Guardianship,
    Invitation,
    Membership,
    Player,
    QuestionnaireAnswer,
    Team,
    Training,
)

# A valid answer to each phase's built-in questions (trainings/answers/presets.py): what a test records when
# it only needs "answered".
WELLNESS = {"sleep_quality": 5, "fatigue": 3, "stress": 2, "soreness": 4}
RPE = {"rpe": 6}
ANSWERED = {"PRE": WELLNESS, "POST": RPE}


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = get_user_model()
        django_get_or_create = ("username",)
        skip_postgeneration_save = True  # `queues` writes rows of its own, never the user

    username = factory.Sequence(lambda n: f"user{n}")
    email = factory.LazyAttribute(lambda u: f"{u.username}@example.com")
    password = factory.django.Password("correct horse battery staple")

    @factory.post_generation
    def queues(self, create: bool, extracted: Any, **kwargs: Any) -> None:
        """`UserFactory(queues=["billing.*"])`: an integration caller of the scheduler API, holding its
        permission and these queue grants (`["*"]`: every queue but the service's own)."""
        if extracted is not None:
            scheduler_caller_grant(self, *extracted)


def scheduler_caller_grant(user: Any, *patterns: str) -> Any:
    """Make `user` a scheduler API caller (reminders.use_scheduler_api) publishing to `patterns`."""
    from django.contrib.auth.models import Permission

    user.user_permissions.add(
        Permission.objects.get(content_type__app_label="reminders", codename="use_scheduler_api")
    )
    for pattern in patterns:
        QueueGrant.objects.get_or_create(user=user, pattern=pattern)
    for cache in ("_perm_cache", "_user_perm_cache"):
        user.__dict__.pop(cache, None)  # has_perm reads the new permission
    return user


class JobFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Job

    key = factory.Sequence(lambda n: f"job-{n}")
    callback_type = CallbackType.RABBITMQ
    target = "test.reminders.default"
    payload = factory.LazyFunction(lambda: {"hello": "world"})


class OccurrenceFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Occurrence

    job = factory.SubFactory(JobFactory)
    fire_at = factory.LazyFunction(lambda: timezone.now() - dt.timedelta(seconds=1))
    next_attempt_at = factory.SelfAttribute("fire_at")
    priority = factory.SelfAttribute("job.priority")


class ThrottlePolicyFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = ThrottlePolicy

    name = factory.Sequence(lambda n: f"policy-{n}")
    max_per_second = 100.0


def schedule_create(
    *,
    key: str,
    expression: str,
    now: dt.datetime | None = None,
    queue: str = "test.reminders.default",
    **fields: Any,
) -> Schedule:
    """A schedule made through the service (schedules are never valid without their backing job)."""
    from reminders.jobs import Callback
    from reminders.schedules.lifecycle import ScheduleSpec, schedule_upsert

    spec = ScheduleSpec(
        expression=expression,
        callback=Callback(type=CallbackType.RABBITMQ, target=queue, payload={"hello": "world"}),
        **fields,
    )
    schedule, _ = schedule_upsert(key=key, spec=spec, now=now)
    return schedule


# --- trainings ------------------------------------------------------------------------------------------


def rules_seeded() -> dict[str, Any]:
    """Seed 000's reminder rules by slug (migration 0002 seeds them; a transactional test's flush removes
    them). Most tests find them all: two queries say so, where seeding asks for each of the eighteen rules
    and templates (an autouse fixture of the trainings tests)."""
    from trainings.models import ReminderRule, ReminderTemplate
    from trainings.planning.defaults import ALL_RULES, rules_seed

    rules = {rule.slug: rule for rule in ReminderRule.objects.all()}
    wanted = {(spec["slug"], language) for spec in ALL_RULES for language in spec["templates"]}
    if {slug for slug, _ in wanted} <= rules.keys():
        have = ReminderTemplate.objects.filter(rule__in=rules.values()).values_list("rule__slug", "language")
        if wanted <= set(have):
            return rules
    rules_seed(ReminderRule, ReminderTemplate)
    return {rule.slug: rule for rule in ReminderRule.objects.all()}


def training_made(
    team: Team,
    start: dt.datetime,
    *,
    minutes: int = 90,
    title: str = "Speed session",
    time_zone: str = "Europe/Paris",
    **fields: Any,
) -> Training:
    """A training made through the service, with its invitations and scheduled reminders (TrainingFactory
    makes a bare row)."""
    from trainings.planning.writes import training_create

    end = start + dt.timedelta(minutes=minutes)
    return training_create(team=team, title=title, start=start, end=end, time_zone=time_zone, **fields)


class TeamFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Team
        skip_postgeneration_save = True

    name = factory.Sequence(lambda n: f"Team {n}")
    time_zone = "Europe/Paris"
    # No quiet hours unless a test sets them (a new team's default is 22:00-07:00): the tests' trainings
    # fire at any hour and mean what they meant before that default.
    quiet_start = None
    quiet_end = None

    @factory.post_generation
    def coaches(self, create: bool, extracted: list | None, **kwargs: object) -> None:
        if create and extracted:
            self.coaches.set(extracted)


class PlayerFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Player
        skip_postgeneration_save = True

    name = factory.Sequence(lambda n: f"Player {n}")
    time_zone = "Europe/Paris"
    language = "en"

    @factory.post_generation
    def devices(self, create: bool, extracted: list | None, **kwargs: object) -> None:
        """One Android (FCM) device named after the player unless `devices=[...]` says otherwise."""
        if not create:
            return
        specs = extracted if extracted is not None else [{"provider": "fcm", "platform": "android"}]
        for spec in specs:
            token = spec.get("token") or f"{spec['provider']}-{self.name.replace(' ', '-').lower()}"
            Device.objects.create(player=self, **{**spec, "token": token})


class DeviceFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Device

    player = factory.SubFactory(PlayerFactory, devices=[])
    provider = "fcm"
    platform = "android"
    token = factory.Sequence(lambda n: f"token-{n}")


class GuardianFactory(factory.django.DjangoModelFactory):
    """A guardian of `player` (`relation` says what to them), with one iOS device unless `devices=[...]`."""

    class Meta:
        model = Guardian
        skip_postgeneration_save = True

    name = factory.Sequence(lambda n: f"Guardian {n}")
    time_zone = "Europe/Paris"
    language = "en"

    @factory.post_generation
    def player(
        self, create: bool, extracted: Player | None, relation: str = "mother", **kwargs: object
    ) -> None:
        if create and extracted is not None:
            Guardianship.objects.create(guardian=self, player=extracted, relation=relation)

    @factory.post_generation
    def devices(self, create: bool, extracted: list | None, **kwargs: object) -> None:
        if not create:
            return
        specs = extracted if extracted is not None else [{"provider": "apns", "platform": "ios"}]
        for spec in specs:
            token = spec.get("token") or f"{spec['provider']}-{self.name.replace(' ', '-').lower()}"
            Device.objects.create(guardian=self, **{**spec, "token": token})


class MembershipFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Membership

    team = factory.SubFactory(TeamFactory)
    player = factory.SubFactory(PlayerFactory)


class TrainingFactory(factory.django.DjangoModelFactory):
    """A bare row: no invitations, nothing scheduled. Use trainings.planning.writes.training_create for
    those."""

    class Meta:
        model = Training

    team = factory.SubFactory(TeamFactory)
    title = factory.Sequence(lambda n: f"Training {n}")
    start = factory.LazyFunction(lambda: timezone.now() + dt.timedelta(days=10))
    end = factory.LazyAttribute(lambda t: t.start + dt.timedelta(minutes=90))
    time_zone = "Europe/Paris"
    location = "Stadium"


class InvitationFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Invitation

    training = factory.SubFactory(TrainingFactory)
    player = factory.SubFactory(PlayerFactory)


class QuestionnaireAnswerFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = QuestionnaireAnswer

    training = factory.SubFactory(TrainingFactory)
    player = factory.SubFactory(PlayerFactory)
    phase = "PRE"
    answered_at = factory.LazyFunction(timezone.now)
    answers = factory.LazyFunction(lambda: {"fatigue": 3})
