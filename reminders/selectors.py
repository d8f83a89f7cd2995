"""Reads, scoped to what the caller may see: staff see everything, other users their own jobs."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import QuerySet

from reminders.models import Job, Occurrence


def jobs_visible_to(user: AbstractBaseUser | AnonymousUser) -> QuerySet[Job]:
    """Jobs, not the jobs backing schedules (those are managed through /api/schedules/), nor those a deleted
    schedule left with its history (its occurrences stay listed under /api/occurrences/)."""
    jobs = Job.objects.filter(schedule__isnull=True).exclude(key__startswith="schedule:")
    if getattr(user, "is_staff", False):
        return jobs
    return jobs.filter(owner_id=user.pk)


def occurrences_visible_to(user: AbstractBaseUser | AnonymousUser) -> QuerySet[Occurrence]:
    if getattr(user, "is_staff", False):
        return Occurrence.objects.all()
    return Occurrence.objects.filter(job__owner_id=user.pk)
