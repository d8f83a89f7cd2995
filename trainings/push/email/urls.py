from __future__ import annotations

from django.urls import include, path

from trainings.push.email.views import answer_page, unsubscribe

urlpatterns = [
    path("answer/<str:token>/", answer_page, name="answer-page"),
    path("email/unsubscribe/<str:token>/", unsubscribe, name="email-unsubscribe"),
    # django-anymail's tracking webhooks (bounces, complaints): /email/anymail/<provider>/tracking/.
    path("email/anymail/", include("anymail.urls")),
]
