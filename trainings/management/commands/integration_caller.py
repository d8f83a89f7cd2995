"""`manage.py integration_caller <username>`: make (or repair) a platform's service account and print its
API token. The account holds `trainings.use_integration_api` (the roster, devices on people's behalf,
webhooks); `--queue PATTERN` also makes it a scheduler caller (`reminders.use_scheduler_api`) publishing
to those queues. It has no password and no staff flag: it signs in only with the token."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction
from rest_framework.authtoken.models import Token

from reminders.models import QueueGrant

INTEGRATION = ("trainings", "use_integration_api")
SCHEDULER = ("reminders", "use_scheduler_api")


class Command(BaseCommand):
    help = "Make or repair a platform's integration account and print its API token (docs/api.md)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument(
            "--queue",
            action="append",
            default=[],
            metavar="PATTERN",
            help="Also a scheduler API caller publishing to queues matching PATTERN (repeatable).",
        )
        parser.add_argument(
            "--rotate", action="store_true", help="Replace the account's token (the old one stops working)."
        )

    def handle(self, *args: Any, username: str, queue: list[str], rotate: bool, **options: Any) -> None:
        with transaction.atomic():
            user, created = get_user_model().objects.get_or_create(username=username)
            if created:
                user.set_unusable_password()
                user.save()
            elif user.is_staff or user.is_superuser:
                raise CommandError(f"{username!r} is a staff account: an integration account is its own user")
            wanted = [INTEGRATION, *([SCHEDULER] if queue else [])]
            for app_label, codename in wanted:
                user.user_permissions.add(
                    Permission.objects.get(content_type__app_label=app_label, codename=codename)
                )
            for pattern in queue:
                QueueGrant.objects.get_or_create(user=user, pattern=pattern)
            if rotate:
                Token.objects.filter(user=user).delete()
            token, _ = Token.objects.get_or_create(user=user)
        self.stdout.write(f"{'Created' if created else 'Kept'} {username}; API token: {token.key}")
