from __future__ import annotations

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

django_application = get_wsgi_application()

from reminders.http.limits import read_chunked_body  # noqa: E402 (Django is set up first)

# A chunked request body reaches Django with its length (see read_chunked_body).
application = read_chunked_body(django_application)
