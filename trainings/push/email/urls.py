from __future__ import annotations

from django.urls import path

from trainings.push.email.views import answer_page, unsubscribe
from trainings.push.email.webhooks import WEBHOOKS, tracking_view

urlpatterns = [
    path("answer/<str:token>/", answer_page, name="answer-page"),
    path("email/unsubscribe/<str:token>/", unsubscribe, name="email-unsubscribe"),
    # The providers' tracking webhooks (bounces, complaints), each served only while its signing key is
    # set (webhooks.py): /email/anymail/<provider>/tracking/.
    *(
        path(f"email/anymail/{w.esp}/tracking/", tracking_view(w), name=f"anymail-{w.esp}-tracking")
        for w in WEBHOOKS
    ),
]
