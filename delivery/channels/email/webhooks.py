"""The email providers' tracking webhooks: a bounce or a complaint they report disables the address
(bounces.py), so a provider's route is served only where its events can be told from a stranger's.

Each provider the settings know is a row of WEBHOOKS: anymail's view, the key its events are signed with,
and what says the site sends through it. Its route answers 404, as if it were not mounted, while that key
is empty (read on every request, like the rest of the settings): anymail would otherwise check signatures
against the empty key, which anyone can sign with. A provider that is configured (the email backend, or
its API key) with an empty key is a deploy check error (`check --deploy`, `trainings.E001`). anymail's
other providers are not mounted at all: most of their webhooks are unauthenticated unless a shared
WEBHOOK_SECRET is set. The per-address limit counts every request (ADDRESS_LIMITED_PATHS).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from anymail.webhooks.mailgun import MailgunTrackingWebhookView
from django.conf import settings
from django.core.checks import CheckMessage, Error
from django.http import Http404, HttpRequest, HttpResponse
from django.views.decorators.csrf import csrf_exempt


@dataclass(frozen=True)
class TrackingWebhook:
    esp: str  # anymail's name for it, the route's segment: /email/anymail/<esp>/tracking/
    view: Any  # anymail's tracking view class
    signing_key: str  # the ANYMAIL setting its events are signed with
    api_key: str  # the ANYMAIL setting that says the site sends through it (beside the email backend)
    backend: str  # the EMAIL_BACKEND that sends through it


WEBHOOKS = (
    TrackingWebhook(
        "mailgun", MailgunTrackingWebhookView, "MAILGUN_WEBHOOK_SIGNING_KEY", "MAILGUN_API_KEY",
        "anymail.backends.mailgun.EmailBackend",
    ),
)  # fmt: skip


def _setting(name: str) -> str:
    return str(getattr(settings, "ANYMAIL", {}).get(name) or "")


def tracking_view(webhook: TrackingWebhook) -> Callable[..., HttpResponse]:
    """The provider's tracking view, served only while its signing key is set."""
    view = webhook.view.as_view()

    @csrf_exempt
    def tracking(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not _setting(webhook.signing_key):
            raise Http404("no such webhook")
        response: HttpResponse = view(request, *args, **kwargs)
        return response

    return tracking


def webhook_keys_check(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """A provider the site sends through, whose tracking events could not be verified: an error."""
    errors: list[CheckMessage] = []
    for webhook in WEBHOOKS:
        configured = webhook.backend == settings.EMAIL_BACKEND or bool(_setting(webhook.api_key))
        if configured and not _setting(webhook.signing_key):
            errors.append(
                Error(
                    f"{webhook.signing_key} is empty while email goes through {webhook.esp}.",
                    hint=f"Set it to the provider's webhook signing key: until then its tracking webhook "
                    f"(/email/anymail/{webhook.esp}/tracking/) answers 404 and bounces disable nothing.",
                    id="trainings.E001",
                )
            )
    return errors
