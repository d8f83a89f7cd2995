"""The pages an email's links open: the answer page and one-click unsubscribe (email_pages.py)."""

from __future__ import annotations

from django.urls import path

from trainings.answers.email_pages import answer_page, unsubscribe

urlpatterns = [
    path("answer/<str:token>/", answer_page, name="answer-page"),
    path("email/unsubscribe/<str:token>/", unsubscribe, name="email-unsubscribe"),
]
