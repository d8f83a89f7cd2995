"""Every language the service speaks, as a person sees it in Chromium: the reminder email, its answer page
(the question, the buttons, the thanks after a tap) for a player of each language whatever the browser
asks for, and the admin in the coach's own language. Screenshots in var/artifacts/browser/:
language-email-<code>.png, language-answer-<code>.png, language-answered-<code>.png and
language-admin-<code>.png."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.urls import reverse

from common.i18n import translated
from delivery.channels.email.message import email_of
from delivery.messages import PushMessage, Target
from tests.browser.conftest import log_in, shot
from tests.factories import MembershipFactory, PlayerFactory, TeamFactory, UserFactory, training_made
from tests.trainings.push_fixtures import message
from trainings.access import coach_group_ensure
from trainings.answers.links import answer_token
from trainings.models import Coach, Invitation, InvitationStatus, Player, ReminderRule, ReminderTemplate
from trainings.planning.defaults import rules_seed
from trainings.planning.offsets import Offset
from trainings.reminding.rendering import push_render

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

START = dt.datetime(2030, 6, 11, 16, tzinfo=dt.UTC)  # 18:00 in Paris
# Per language: the email's button, the answer page's question (its start) and thanks, and the admin
# index's "Reminder effectiveness" link and Django's "Log out".
SEEN = {
    "de": ("Ich komme", "Kommst du zu Speed session am", "Du bist dabei: Dein Trainer sieht, dass du kommst.",
           "Wirkung der Erinnerungen", "Abmelden"),
    "en": ("I'll come", "Will you come to Speed session on", "You're in: your coach sees that you will come.",
           "Reminder effectiveness", "Log out"),
    "es": ("Voy", "¿Vienes a Speed session el", "Estás dentro: tu entrenador ve que vendrás.",
           "Eficacia de los recordatorios", "Cerrar sesión"),
    "fr": ("Je viens", "Viendras-tu à Speed session le", "C'est noté : ton entraîneur voit que tu viens.",
           "Efficacité des rappels", "Déconnexion"),
    "it": ("Ci sarò", "Vieni a Speed session,", "Ci sei: il tuo allenatore vede che verrai.",
           "Efficacia dei promemoria", "Annulla l'accesso"),
    "nl": ("Ik kom", "Kom je naar Speed session op", "Je bent erbij: je trainer ziet dat je komt.",
           "Effect van de herinneringen", "Afmelden"),
}  # fmt: skip


def test_a_player_reads_the_email_and_answers_in_their_language(
    live_server: Any, page: Any, settings: Any
) -> None:
    rules_seed(ReminderRule, ReminderTemplate)
    settings.TRAININGS_PUBLIC_URL = live_server.url
    team = TeamFactory(name="U15", time_zone="Europe/Paris")
    for language in SEEN:
        MembershipFactory(team=team, player=PlayerFactory(name=f"Player {language}", language=language))
    training = training_made(team, START, title="Speed session", location="Stadium")
    templates = list(ReminderRule.objects.get(slug="invitation").templates.all())
    # The browser asks for Dutch; each page is in its reader's language all the same.
    page.set_extra_http_headers({"Accept-Language": "nl"})
    for language, (button, question, thanks, _, _) in SEEN.items():
        player = Player.objects.get(name=f"Player {language}")
        rendered = push_render(templates=templates, training=training, player=player, offset=Offset(1, "d"))
        push = PushMessage.from_body(message(
            f"occ.{language}", player.pk, kind="INVITATION", training=str(training.pk),
            language=rendered.language, title=rendered.title, body=rendered.body,
        ))  # fmt: skip
        page.set_content(email_of(push, Target(7, "email", "email", "a@example.com")).html)
        assert page.locator("h1").inner_text() == rendered.title
        assert page.get_by_role("link", name=button).count() == 1
        shot(page, f"language-email-{language}")

        token = answer_token(player_id=player.pk, training_id=training.pk, kind="INVITATION", channel="email")
        page.goto(live_server.url + reverse("answer-page", kwargs={"token": token}))
        assert page.locator("html").get_attribute("lang") == language
        assert page.locator("p").first.inner_text().startswith(question)
        shot(page, f"language-answer-{language}")
        page.get_by_role("button", name=button).click()
        page.wait_for_selector("p.recorded")
        assert thanks in page.locator("p.recorded").inner_text()
        shot(page, f"language-answered-{language}")
        assert Invitation.objects.get(training=training, player=player).status == InvitationStatus.ACCEPTED


def test_a_coach_reads_the_admin_in_their_own_language(live_server: Any, page: Any) -> None:
    user = UserFactory(username="coach", is_staff=True, first_name="Camille")
    user.groups.add(coach_group_ensure())
    coach = Coach.objects.create(user=user, language="en", time_zone="Europe/Paris")
    team = TeamFactory(name="U15", coaches=[user])
    training = training_made(team, START, title="Speed session", location="Stadium")
    log_in(page, live_server.url, "coach")
    for language, (_, _, _, effectiveness, log_out) in SEEN.items():
        Coach.objects.filter(pk=coach.pk).update(language=language)
        page.goto(f"{live_server.url}/admin/")
        assert page.locator("html").get_attribute("lang") == language
        link = page.locator("#coach-links").get_by_role("link", name=effectiveness)
        # Its name on at most two lines beside the description, in every language's length.
        assert link.count() == 1 and link.bounding_box()["height"] < 45, link.bounding_box()
        assert log_out in page.locator("#logout-form").text_content()
        models = [name.strip() for name in page.locator(".app-trainings th").all_text_contents()]
        assert translated(language, "players").capitalize() in models, models  # the models' names too
        shot(page, f"language-admin-{language}")

    # A training's change page and the training list: the fields' labels, a fieldset and the columns are
    # the coach's language too (the models' verbose names, the admin's own texts), not Django's English.
    Coach.objects.filter(pk=coach.pk).update(language="de")
    page.goto(f"{live_server.url}{reverse('admin:trainings_training_change', args=[training.pk])}")
    assert page.locator("label[for=id_title]").inner_text().strip() == "Titel:"
    assert page.locator(".field-start label").first.inner_text().strip() == "Beginn:"
    assert page.locator("label[for=id_location]").inner_text().strip() == "Ort:"
    assert page.locator("label[for=id_cancelled]").inner_text().strip() == "Abgesagt"
    assert "Ortszeit in der Zeitzone des Trainings" in page.locator(".field-start").inner_text()
    assert {"Spieler", "Erinnerungen"} <= {h.strip() for h in page.locator("fieldset h2").all_text_contents()}
    assert page.locator("#record-answer").inner_text().strip() == "Antwort eintragen"
    shot(page, "language-admin-training-de")
    page.goto(f"{live_server.url}{reverse('admin:trainings_training_changelist')}")
    columns = [name.strip() for name in page.locator("#result_list thead th").all_text_contents()]
    assert {"Titel", "Team", "Beginn (Ortszeit)", "Nächste Erinnerung (Ortszeit)", "Status"} <= set(
        columns
    ), columns
    assert "Bevorstehend" in page.locator("td.field-state").first.inner_text()
    shot(page, "language-admin-trainings-de")
