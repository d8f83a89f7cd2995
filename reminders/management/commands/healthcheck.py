"""`manage.py healthcheck`: /health/ready's checks for container and systemd probes; exit 1 on failure."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from reminders.ops.health import readiness


class Command(BaseCommand):
    help = "Check the database, the broker and the due scan, like /health/ready; exit status 1 if one fails."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--json", action="store_true", help="Print the same JSON body as /health/ready.")

    def handle(self, *args: Any, **options: Any) -> None:
        checks = readiness()
        failing = [check.name for check in checks if not check.ok]
        if options["json"]:
            body = {
                "status": "fail" if failing else "ok",
                "failing": failing,
                "checks": {check.name: check.as_dict() for check in checks},
            }
            self.stdout.write(json.dumps(body))
        else:
            for check in checks:
                self.stdout.write(f"{'ok  ' if check.ok else 'FAIL'} {check.name}: {check.detail}")
        if failing:
            raise CommandError(f"not ready: {', '.join(failing)}", returncode=1)
