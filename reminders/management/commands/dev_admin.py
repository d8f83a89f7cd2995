from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from rest_framework.authtoken.models import Token

from common.address import site_url
from reminders.models import QueueGrant

# The README's example publishes here; other queues need a grant of their own (admin: queue grants).
README_QUEUE = "training.invitations.notifications"


class Command(BaseCommand):
    help = (
        "Development only (DJANGO_DEBUG=1): ensure an `admin` superuser exists, may publish to the README's "
        "queue, and print its API token."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        if not settings.DEBUG:
            raise CommandError("dev_admin only runs with DJANGO_DEBUG=1; use createsuperuser in production")
        user_model = get_user_model()
        user, created = user_model.objects.get_or_create(
            username="admin", defaults={"is_staff": True, "is_superuser": True}
        )
        if created:
            user.set_password("admin")
            user.save()
        # A superuser holds reminders.use_scheduler_api already; queues are granted one by one.
        QueueGrant.objects.get_or_create(user=user, pattern=README_QUEUE)
        token, _ = Token.objects.get_or_create(user=user)
        self.stdout.write(
            f"Admin: {site_url('/admin/')} (admin / admin)   API docs: {site_url('/api/docs/')}\n"
            f"Status: {site_url('/admin/status/')}\n"
            f"API token: {token.key}   e.g. curl -H 'Authorization: Token {token.key}' "
            f"{site_url('/api/jobs/')}"
        )
