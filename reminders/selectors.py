"""Reads, scoped to what the caller may see: staff see everything, other users their own jobs."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import Q, QuerySet

from reminders import handlers
from reminders.models import Job, Occurrence


def jobs_visible_to(user: AbstractBaseUser | AnonymousUser) -> QuerySet[Job]:
    """Jobs, not the jobs backing schedules (those are managed through /api/schedules/), nor those in a
    key namespace an app reserved (managed through that app: a training's are its coaches', and coaches
    are staff too)."""
    jobs = Job.objects.filter(schedule__isnull=True)
    for pattern in handlers.reserved_key_patterns():
        jobs = jobs.exclude(Q(key__iregex=f"^{pattern}"))
    if getattr(user, "is_staff", False):
        return jobs
    return jobs.filter(owner_id=user.pk)


def occurrences_visible_to(user: AbstractBaseUser | AnonymousUser) -> QuerySet[Occurrence]:
    if getattr(user, "is_staff", False):
        return Occurrence.objects.all()
    return Occurrence.objects.filter(job__owner_id=user.pk)
