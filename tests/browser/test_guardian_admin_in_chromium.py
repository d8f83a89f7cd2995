"""The guardian admin in a real browser: the change page of a guardian with a login opens and saves (it
was a 500), and a coach who saves a new guardian without a player is told so on the form, adds one and
finds the guardian in their list, cannot take that last player away, and deletes the guardian instead
(screenshots guardian-*.png)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.browser.conftest import log_in, shot
from tests.factories import GuardianFactory, MembershipFactory, PlayerFactory, TeamFactory, UserFactory
from trainings.access import coach_group_ensure
from trainings.models import Guardian

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def test_an_operator_opens_and_saves_a_guardian_with_a_login(page: Any, live_server: Any) -> None:
    UserFactory(username="root", is_staff=True, is_superuser=True)
    login = UserFactory(username="maria-login")
    team = TeamFactory(name="U15 Paris")
    alice = PlayerFactory(name="Alice")
    MembershipFactory(team=team, player=alice)
    maria = GuardianFactory(name="Maria", user=login, player=alice, devices=[])

    log_in(page, live_server.url, "root")
    response = page.goto(f"{live_server.url}/admin/trainings/guardian/{maria.pk}/change/")
    assert response.status == 200
    assert page.input_value("#id_user") == str(login.pk)
    page.fill("#id_name", "Maria Rossi")
    shot(page, "guardian-change-with-login")
    page.click("input[name=_continue]")
    page.wait_for_selector(".messagelist .success")
    assert "was changed successfully" in page.inner_text(".messagelist")
    shot(page, "guardian-changed")
    maria.refresh_from_db()
    assert (maria.name, maria.user) == ("Maria Rossi", login)


def test_a_coach_is_told_a_new_guardian_needs_a_player_then_adds_one(page: Any, live_server: Any) -> None:
    coach = UserFactory(username="coach", is_staff=True)
    coach.groups.add(coach_group_ensure())
    team = TeamFactory(name="U15 Paris", coaches=[coach])
    MembershipFactory(team=team, player=PlayerFactory(name="Alice"))

    log_in(page, live_server.url, "coach")
    page.goto(f"{live_server.url}/admin/trainings/guardian/add/")
    page.fill("#id_name", "Paul")
    page.click("input[name=_save]")
    page.wait_for_selector(".errornote")
    assert "A guardian guards at least one player" in page.inner_text("#guardianships-group")
    shot(page, "guardian-add-without-player")
    assert not Guardian.objects.filter(name="Paul").exists()

    page.click("#guardianships-group .add-row a")
    page.locator("#guardianships-group .dynamic-guardianships .select2-selection").first.click()
    page.locator(".select2-search__field").press_sequentially("Ali")
    option = page.locator("li.select2-results__option", has_text="Alice")
    option.wait_for()
    option.click()
    page.fill("#id_guardianships-0-relation", "father")
    page.click("input[name=_continue]")
    page.wait_for_selector(".messagelist .success")
    assert "was added successfully" in page.inner_text(".messagelist")
    assert page.input_value("#id_name") == "Paul"  # its change page: the coach sees what they saved
    shot(page, "guardian-added-with-player")
    page.goto(f"{live_server.url}/admin/trainings/guardian/")
    assert "Paul" in page.inner_text("#result_list")

    # Taking the last player away would hide the guardian again: refused; deleting them is the way.
    page.click("#result_list a:text('Paul')")
    page.check("#id_guardianships-0-DELETE")
    page.click("input[name=_save]")
    page.wait_for_selector(".errornote")
    assert "to remove this guardian, delete them" in page.inner_text("#guardianships-group")
    shot(page, "guardian-last-player-kept")
    page.click("a.deletelink")
    page.click("input[type=submit]")  # "Yes, I'm sure"
    page.wait_for_selector(".messagelist .success")
    assert "was deleted successfully" in page.inner_text(".messagelist")
    assert not Guardian.objects.filter(name="Paul").exists()
