"""A coach links a player's account in a real browser: the account box searches free accounts by exact
name and finds neither a staff account nor another team's player's (screenshot player-account.png)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.browser.conftest import log_in, shot
from tests.factories import MembershipFactory, PlayerFactory, TeamFactory, UserFactory
from trainings.access import coach_group_ensure
from trainings.models import Player

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def test_a_coach_finds_and_links_only_a_free_account(page: Any, live_server: Any) -> None:
    coach = UserFactory(username="coach", is_staff=True)
    coach.groups.add(coach_group_ensure())
    team = TeamFactory(name="U15 Paris", coaches=[coach])
    dora = PlayerFactory(name="Dora")
    MembershipFactory(team=team, player=dora)
    UserFactory(username="root-account", is_staff=True, is_superuser=True)
    other = TeamFactory(name="Seniors B")
    MembershipFactory(team=other, player=PlayerFactory(name="Zoe", user=UserFactory(username="zoe-account")))
    UserFactory(username="dora-account")

    log_in(page, live_server.url, "coach")
    page.goto(f"{live_server.url}/admin/trainings/player/{dora.pk}/change/")
    box = page.locator(".field-user .select2-selection")
    for refused in ("root-account", "zoe-account", "dora"):
        box.click()
        with page.expect_response(lambda r, term=refused: f"term={term}" in r.url) as answer:
            page.locator(".select2-search__field").press_sequentially(refused)
        assert answer.value.json()["results"] == [], refused
        page.wait_for_selector(".select2-results__message")  # "No results found"
        page.keyboard.press("Escape")

    box.click()
    with page.expect_response(lambda r: "term=dora-account" in r.url) as answer:
        page.locator(".select2-search__field").press_sequentially("dora-account")
    assert answer.value.json()["results"][0]["text"] == "dora-account"
    option = page.locator("li.select2-results__option", has_text="dora-account")
    option.wait_for()
    shot(page, "player-account")
    option.click()
    page.click("input[name=_save]")
    page.wait_for_selector(".messagelist")
    assert Player.objects.get(pk=dora.pk).user.username == "dora-account"
