"""Reads, scoped to what the caller may see: staff see everything, other users their own jobs."""

from __future__ import annotations

from typing import TypeVar

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import Model, Q, QuerySet

from reminders.engine import handler_registry
from reminders.models import Job, Occurrence, Schedule

User = AbstractBaseUser | AnonymousUser
_M = TypeVar("_M", bound=Model)


def jobs_visible_to(user: User) -> QuerySet[Job]:
    """Jobs, not the jobs backing schedules (those are managed through /api/schedules/) or left by a deleted
    schedule with its history (its occurrences stay under /api/occurrences/), nor those in a key namespace
    an app reserved (managed through that app: a training's are its coaches', and coaches are staff too)."""
    jobs = Job.objects.filter(schedule__isnull=True).exclude(key__startswith="schedule:")
    return _owned_by(_outside_reserved(jobs, key="key"), user, owner="owner_id")


def occurrences_visible_to(user: User) -> QuerySet[Occurrence]:
    """Occurrences of the caller's jobs and schedules; those of reserved namespaces stay with their app
    (a coach is staff, and must not read another team's reminders here)."""
    occurrences = _outside_reserved(Occurrence.objects.all(), key="job__key")
    return _owned_by(occurrences, user, owner="job__owner_id")


def schedules_visible_to(user: User) -> QuerySet[Schedule]:
    return _owned_by(Schedule.objects.select_related("job", "job__throttle"), user, owner="owner_id")


def _outside_reserved(queryset: QuerySet[_M], *, key: str) -> QuerySet[_M]:
    for pattern in handler_registry.reserved_key_patterns():
        queryset = queryset.exclude(Q(**{f"{key}__iregex": f"^{pattern}"}))
    return queryset


def _owned_by(queryset: QuerySet[_M], user: User, *, owner: str) -> QuerySet[_M]:
    """Staff see everything; other users what they own."""
    if getattr(user, "is_staff", False):
        return queryset
    return queryset.filter(**{owner: user.pk})
