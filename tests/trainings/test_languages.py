"""Every language the service speaks, where a player, guardian or coach reads it: pushes (a rule's shipped
template translated, a coach's own text as typed), notices, the coach's digest (plural forms), the email
(subject, text, HTML), the email's answer page and the admin. A language the service does not speak falls
back (its base language, else English), and cannot be chosen: the API and the admin refuse it, and the
data migration moved stored ones onto the fallback, keeping every row."""

from __future__ import annotations

import datetime as dt
import email
import html
from email.policy import default as default_policy
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from delivery.channels.email.message import as_bytes, email_of
from delivery.messages import PushMessage, Target
from tests.clients import api_as
from tests.factories import (
    GuardianFactory,
    MembershipFactory,
    PlayerFactory,
    TeamFactory,
    UserFactory,
    training_made,
)
from tests.trainings.push_fixtures import message
from trainings.access import coach_group_ensure
from trainings.answers.links import answer_token
from trainings.digest.owed import Owed, TrainingOwed
from trainings.digest.texts import decline_render, digest_render
from trainings.models import Coach, Player, ReminderRule, ReminderTemplate, Training
from trainings.planning import kinds
from trainings.planning.offsets import Offset
from trainings.reminding.rendering import notice_render, push_render

pytestmark = pytest.mark.django_db

START = dt.datetime(2030, 6, 11, 16, tzinfo=dt.UTC)  # 18:00 in Paris
LANGUAGES = ["de", "en", "es", "fr", "it", "nl"]
# What each language says, from locale/: the invitation's push title, the answer page's question (its
# start), the month of START (as Django writes it: Italian capitalized), the email's accept button and
# the answer page's thanks.
SAYS = {
    "de": ("Kommst du zu Speed session?", "Kommst du zu Speed session am ", "Juni", "Ich komme",
           "Du bist dabei: Dein Trainer sieht, dass du kommst."),
    "en": ("Will you come to Speed session?", "Will you come to Speed session on ", "June", "I'll come",
           "You're in: your coach sees that you will come."),
    "es": ("¿Vienes a Speed session?", "¿Vienes a Speed session el ", "junio", "Voy",
           "Estás dentro: tu entrenador ve que vendrás."),
    "fr": ("Serez-vous à Speed session ?", "Viendras-tu à Speed session le ", "juin", "Je viens",
           "C'est noté : ton entraîneur voit que tu viens."),
    "it": ("Vieni a Speed session?", "Vieni a Speed session, ", "Giugno", "Ci sarò",
           "Ci sei: il tuo allenatore vede che verrai."),
    "nl": ("Kom je naar Speed session?", "Kom je naar Speed session op ", "juni", "Ik kom",
           "Je bent erbij: je trainer ziet dat je komt."),
}  # fmt: skip


@pytest.fixture(autouse=True)
def _pushes_to_a_test_queue(push_queue: str) -> None:
    pass


@pytest.fixture
def training(db: None) -> Training:
    team = TeamFactory(name="U15", time_zone="Europe/Paris")
    for language in LANGUAGES:
        MembershipFactory(team=team, player=PlayerFactory(name=f"Player {language}", language=language))
    return training_made(team, START, title="Speed session", location="Stadium")


def _templates(slug: str) -> list[ReminderTemplate]:
    return list(ReminderRule.objects.get(slug=slug).templates.all())


def _reader(language: str, zone: str = "Europe/Paris") -> Player:
    return PlayerFactory.build(language=language, time_zone=zone)


@pytest.mark.parametrize("language", LANGUAGES)
def test_a_push_of_a_shipped_template_is_in_the_players_language(training: Training, language: str) -> None:
    rendered = push_render(templates=_templates("invitation"), training=training, player=_reader(language),
                           offset=Offset(1, "d"))  # fmt: skip
    assert (rendered.language, rendered.title) == (language, SAYS[language][0])
    assert SAYS[language][2] in rendered.body and "Stadium" in rendered.body and "U15" in rendered.body
    assert "{" not in rendered.body  # every placeholder filled


def test_a_coachs_own_text_is_shown_as_typed_and_a_template_in_the_readers_language_wins(
    training: Training,
) -> None:
    rule = ReminderRule.objects.get(slug="invitation")
    ReminderTemplate.objects.filter(rule=rule, language="en").update(title="Coming to {title}, mate?")
    ReminderTemplate.objects.create(rule=rule, language="nl", title="Ben je erbij, {title}?", body="{team}")
    templates = _templates("invitation")
    german = push_render(templates=templates, training=training, player=_reader("de"), offset=Offset(1, "d"))
    assert (german.language, german.title) == ("en", "Coming to Speed session, mate?")  # nobody's msgid
    dutch = push_render(templates=templates, training=training, player=_reader("nl"), offset=Offset(1, "d"))
    assert (dutch.language, dutch.title, dutch.body) == ("nl", "Ben je erbij, Speed session?", "U15")


@pytest.mark.parametrize(
    ("stored", "reads"), [("pt-br", "en"), ("fr-CA", "fr"), ("DE", "de"), ("", "en"), ("klingon", "en")]
)
def test_a_language_the_service_does_not_speak_reads_its_base_language_or_english(
    training: Training, stored: str, reads: str
) -> None:
    """A value that got past the API and the admin (a bulk insert, an old row): the fallback, at render."""
    rendered = push_render(templates=_templates("invitation"), training=training, player=_reader(stored),
                           offset=Offset(1, "d"))  # fmt: skip
    assert (rendered.language, rendered.title) == (reads, SAYS[reads][0])


@pytest.mark.parametrize("language", LANGUAGES)
def test_the_moved_notice_is_in_the_readers_language(training: Training, language: str) -> None:
    rendered = notice_render(kind=kinds.MOVED, training=training, player=_reader(language))
    moved = {
        "de": "Training verlegt: ",
        "en": "Training moved: ",
        "es": "Entrenamiento cambiado: ",
        "fr": "Entraînement déplacé : ",
        "it": "Allenamento spostato: ",
        "nl": "Training verplaatst: ",
    }
    assert rendered.title == moved[language] + "Speed session"
    assert rendered.language == language and SAYS[language][2] in rendered.body


@pytest.mark.parametrize(
    ("language", "one", "three"),
    [
        ("de", "1 von 6 muss noch den Fragebogen vor dem Training ausfüllen: Anna",
         "3 von 6 müssen noch den Fragebogen vor dem Training ausfüllen: Anna, Ben, Chloé; 2 Absagen"),
        ("en", "1 of 6 still owes the pre-training questionnaire: Anna",
         "3 of 6 still owe the pre-training questionnaire: Anna, Ben, Chloé; 2 declined"),
        ("es", "1 de 6 aún tiene que rellenar el cuestionario previo al entrenamiento: Anna",
         "3 de 6 aún tienen que rellenar el cuestionario previo al entrenamiento: Anna, Ben, Chloé; 2 bajas"),
        ("fr", "1 sur 6 doit encore remplir le questionnaire d'avant séance : Anna",
         "3 sur 6 doivent encore remplir le questionnaire d'avant séance : Anna, Ben, Chloé; "
         "désistements : 2"),
        ("it", "1 su 6 deve ancora compilare il questionario pre-allenamento: Anna",
         "3 su 6 devono ancora compilare il questionario pre-allenamento: Anna, Ben, Chloé; 2 forfait"),
        ("nl", "1 van 6 moet nog de vragenlijst vóór de training invullen: Anna",
         "3 van 6 moeten nog de vragenlijst vóór de training invullen: Anna, Ben, Chloé; 2 afzeggingen"),
    ],
)  # fmt: skip
def test_the_coachs_digest_is_in_their_language_with_its_plural_forms(
    training: Training, language: str, one: str, three: str
) -> None:
    coach = _reader(language)
    templates = _templates("coach-digest")
    single = TrainingOwed(training, (Owed("PRE", 6, ("Anna",)),))
    several = TrainingOwed(training, (Owed("PRE", 6, ("Anna", "Ben", "Chloé")),), declined=2)
    for owed, says in ((single, one), (several, three)):
        rendered = digest_render(templates=templates, coach=coach, trainings=[owed])
        assert rendered is not None and rendered.language == language
        assert rendered.body.endswith(says), rendered.body
        assert rendered.body.startswith("U15 Speed session ")
    late = decline_render(templates=_templates("coach-late-decline"), coach=coach, training=training,
                          player="Anna", before=dt.timedelta(hours=2, minutes=10))  # fmt: skip
    assert "Anna" in late.body and "2 h 10 min" in late.body and late.language == language


@pytest.mark.parametrize("language", LANGUAGES)
def test_the_email_says_its_words_in_the_readers_language(
    training: Training, settings: Any, language: str
) -> None:
    settings.TRAININGS_PUBLIC_URL = "https://coach.example.com"
    player = Player.objects.get(name=f"Player {language}")
    rendered = push_render(templates=_templates("invitation"), training=training, player=player,
                           offset=Offset(1, "d"))  # fmt: skip
    push = PushMessage.from_body(
        message(
            "occ.1",
            player.pk,
            kind="INVITATION",
            training=str(training.pk),
            language=rendered.language,
            title=rendered.title,
            body=rendered.body,
        )
    )
    mail = email.message_from_bytes(as_bytes(email_of(push, Target(7, "email", "email", "a@example.com"))),
                                    policy=default_policy)  # fmt: skip
    plain, rich = mail.get_body(preferencelist=("plain",)), mail.get_body(preferencelist=("html",))
    assert plain is not None and rich is not None
    text, page = plain.get_content(), rich.get_content()
    assert mail["Subject"] == SAYS[language][0] and mail["Content-Language"] == language
    assert f"{SAYS[language][3]}: https://coach.example.com/answer/" in text
    assert f'<html lang="{language}">' in page and SAYS[language][3] in html.unescape(page)


@pytest.mark.parametrize("language", LANGUAGES)
def test_the_answer_page_is_in_the_readers_language_whatever_the_browser_says(
    training: Training, language: str
) -> None:
    player = Player.objects.get(name=f"Player {language}")
    token = answer_token(player_id=player.pk, training_id=training.pk, kind="INVITATION", channel="email")
    path = reverse("answer-page", kwargs={"token": token})
    browser = Client(headers={"accept-language": "it" if language != "it" else "de"})
    page = browser.get(path)
    assert page.status_code == 200 and page["Content-Language"] == language
    body = html.unescape(page.content.decode())
    assert SAYS[language][1] in body and SAYS[language][2] in body and SAYS[language][3] in body
    answered = html.unescape(browser.post(path, {"response": "accepted"}).content.decode())
    assert SAYS[language][4] in answered


def test_a_guardians_answer_page_is_in_the_guardians_language(training: Training) -> None:
    player = Player.objects.get(name="Player en")
    guardian = GuardianFactory(name="Oma", language="de", player=player)
    token = answer_token(player_id=player.pk, training_id=training.pk, kind="INVITATION", channel="email",
                         guardian_id=guardian.pk)  # fmt: skip
    page = Client().get(reverse("answer-page", kwargs={"token": token}))
    assert (
        "Kommt Player en zu Speed session am " in page.content.decode() and page["Content-Language"] == "de"
    )


def test_a_page_that_knows_no_reader_is_in_the_browsers_language(db: None) -> None:
    path = reverse("answer-page", kwargs={"token": "not-a-token"})
    page = Client(headers={"accept-language": "nl,en;q=0.5"}).get(path)
    assert page.status_code == 400 and "Dit is geen geldige antwoordlink." in page.content.decode()
    english = Client(headers={"accept-language": "pt-BR"}).get(path)  # not spoken: English
    assert "This is not a valid answer link." in english.content.decode()


@pytest.mark.parametrize("language", ["pt-br", "xx", "FR", "fr-CA"])
def test_the_api_takes_only_a_language_the_service_speaks(coach: Any, language: str) -> None:
    team = TeamFactory(name="U15", coaches=[coach])
    player = PlayerFactory(name="Anna")
    MembershipFactory(team=team, player=player)
    api = api_as(coach)
    body = {"name": "Paul", "language": language, "players": [{"player": player.pk}]}
    response = api.post("/api/guardians/", body, format="json")
    assert response.status_code == 400 and "language" in response.json(), response.content
    response = api.patch("/api/coach/", {"language": language}, format="json")
    assert response.status_code == 400 and "language" in response.json(), response.content
    assert not Coach.objects.exists()
    assert api.post("/api/guardians/", {**body, "language": "nl"}, format="json").status_code == 201


def test_the_admin_offers_the_languages_the_service_speaks_and_speaks_the_coachs(coach: Any) -> None:
    coach.is_staff = True
    coach.save()
    coach.groups.add(coach_group_ensure())
    team = TeamFactory(name="U15", coaches=[coach])
    player = PlayerFactory(name="Anna")
    MembershipFactory(team=team, player=player)
    browser = Client(headers={"accept-language": "fr"})
    browser.force_login(coach)
    page = browser.get(f"/admin/trainings/player/{player.pk}/change/")
    assert page.status_code == 200
    options = page.content.decode().split('id="id_language"')[1].split("</select>")[0]
    assert [code for code in LANGUAGES if f'value="{code}"' in options] == LANGUAGES
    assert options.count("<option") == len(LANGUAGES)
    assert page["Content-Language"] == "fr"  # no profile yet: the browser's
    Coach.objects.create(user=coach, language="de")
    index = browser.get("/admin/")
    assert index["Content-Language"] == "de"
    text = index.content.decode()
    assert "Abmelden" in text and "Wirkung der Erinnerungen" in text  # Django's words, and ours
    api = browser.get(f"/admin/trainings/player/{player.pk}/change/", headers={"accept-language": "nl"})
    assert api["Content-Language"] == "de"  # the coach's, whatever the browser


def test_the_migration_moves_languages_not_spoken_onto_the_fallback_and_keeps_every_row() -> None:
    from importlib import import_module

    from django.apps import apps

    migration = import_module("trainings.migrations.0039_languages_spoken")
    stored = ["pt-br", "fr-CA", "de", "nl-BE", "", "zh-hans", "it"]
    players = [PlayerFactory(name=f"P{i}", devices=[]) for i in range(len(stored))]
    for player, language in zip(players, stored, strict=True):
        Player.objects.filter(pk=player.pk).update(language=language)  # as an old row may hold
    guardian = GuardianFactory(name="G", devices=[])
    type(guardian).objects.filter(pk=guardian.pk).update(language="es-MX")
    Coach.objects.create(user=UserFactory(username="c"), language="en")
    Coach.objects.filter().update(language="ja")
    migration.languages_spoken(apps, None)
    assert list(Player.objects.filter(pk__in=[p.pk for p in players]).order_by("name").values_list(
        "language", flat=True)) == ["en", "fr", "de", "nl", "en", "en", "it"]  # fmt: skip
    assert type(guardian).objects.get().language == "es"
    assert Coach.objects.get().language == "en"
