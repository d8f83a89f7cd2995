"""The email providers' tracking webhooks (bounces, complaints), each served only while its signing key is
set (webhooks.py): /email/anymail/<provider>/tracking/."""

from __future__ import annotations

from django.urls import path

from delivery.channels.email.webhooks import WEBHOOKS, tracking_view

urlpatterns = [
    path(f"email/anymail/{w.esp}/tracking/", tracking_view(w), name=f"anymail-{w.esp}-tracking")
    for w in WEBHOOKS
]
