"""`check --deploy --fail-level WARNING` for several environments in one fresh process.

`python -m tests.security.deploy_check_variants` reads a JSON list of environments on stdin and prints, per
environment, the check's return code and output. Each environment is set in `os.environ` and the settings
module is executed again from it (a fresh `django.conf.Settings`), as a deployment's process would read it;
only the loaded apps are shared, and the environments must not change `INSTALLED_APPS`. One process instead
of one per environment: starting Django (importing every app) is most of a check's two seconds of CPU.
"""

from __future__ import annotations

import io
import json
import os
import sys
from typing import Any

SETTINGS_MODULE = "config.settings"


def _settings_read_again() -> None:
    """Point Django at a fresh execution of the settings module under the current environment."""
    import django
    from django.conf import Settings, settings

    sys.modules.pop(SETTINGS_MODULE, None)
    if not settings.configured:
        django.setup()
        return
    fresh = Settings(SETTINGS_MODULE)
    if list(fresh.INSTALLED_APPS) != list(settings.INSTALLED_APPS):
        raise SystemExit("an environment changed INSTALLED_APPS: check it in a process of its own")
    settings._wrapped = fresh


def deploy_check(environment: dict[str, str]) -> dict[str, Any]:
    """The check's return code (0: no warning or worse) and its output, under `environment` alone."""
    from django.core.management import CommandError, call_command

    os.environ.clear()
    os.environ.update(environment)
    os.environ["DJANGO_SETTINGS_MODULE"] = SETTINGS_MODULE
    _settings_read_again()
    out, err = io.StringIO(), io.StringIO()
    try:
        call_command("check", "--deploy", "--fail-level", "WARNING", stdout=out, stderr=err)
        returncode = 0
    except CommandError as failed:  # SystemCheckError: a message at or above the fail level
        err.write(str(failed))
        returncode = 1
    return {"returncode": returncode, "stdout": out.getvalue(), "stderr": err.getvalue()}


def main() -> None:
    environments = json.load(sys.stdin)
    results = [deploy_check(environment) for environment in environments]
    print(json.dumps(results))


if __name__ == "__main__":
    main()
