"""factory_boy factories for every app, in one place."""

from __future__ import annotations

import datetime as dt

import factory
from django.contrib.auth import get_user_model
from django.utils import timezone

from reminders.models import CallbackType, Job, Occurrence


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = get_user_model()
        django_get_or_create = ("username",)

    username = factory.Sequence(lambda n: f"user{n}")
    email = factory.LazyAttribute(lambda u: f"{u.username}@example.com")
    password = factory.django.Password("correct horse battery staple")


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
