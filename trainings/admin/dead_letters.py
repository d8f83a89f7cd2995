"""The admin's dead-letter page (/admin/push-dead-letters/): the pushes the gateway gave up on, with their
player and training by name, their error and the message as it was; replay one or all from here as with
`manage.py push_dead_letters --replay`. Operators only."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from django.contrib import admin, messages
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_POST

from common.admin_widgets import pretty_json
from delivery.api import ReplayRefused, dead_letters_pass, dead_letters_replay
from trainings.admin.status_page import require_operator
from trainings.models import Player, Push, Training

# A page reads at most this many messages (each is handed back to the queue unacknowledged).
PAGE_LIMIT = 200


def dead_letters_view(request: HttpRequest) -> HttpResponse:
    require_operator(request)
    error = ""
    try:
        letters = dead_letters_pass(limit=PAGE_LIMIT).letters
    except Exception as exc:  # the broker's trouble is the news, not a 500
        letters, error = [], f"{type(exc).__name__}: {exc}"
    pushes = {
        p.key: p
        for p in Push.objects.filter(key__in=[d.key for d in letters]).select_related("player", "training")
    }
    # A push without its row (published by another service, or purged): its ids, in words where we can.
    players = dict(
        Player.objects.filter(pk__in=[d.player for d in letters if str(d.player).isdigit()]).values_list(
            "pk", "name"
        )
    )
    trainings = dict(
        Training.objects.filter(pk__in=[d.training for d in letters if _uuid(d.training)]).values_list(
            "pk", "title"
        )
    )
    rows = []
    for letter in letters:
        push = pushes.get(letter.key)
        rows.append(
            {
                "letter": letter,
                "player": push.player.name
                if push
                else players.get(_int(letter.player) or 0, f"player #{letter.player}"),
                "training": push.training.title
                if push
                else trainings.get(_uuid(letter.training) or uuid.UUID(int=0), letter.training),
                "kind": push.get_kind_display().split(" (")[0] if push else "",
                "dead_at": _local(letter.dead_at),
                "json": pretty_json(_links_hidden(letter.document)),
            }
        )
    context: dict[str, Any] = {
        **admin.site.each_context(request),
        "title": "Dead-lettered pushes",
        "rows": rows,
        "limit": PAGE_LIMIT,
        "error": error,
    }
    return TemplateResponse(request, "admin/dead_letters.html", context)


def _links_hidden(value: Any) -> Any:
    """The document as shown: its signed answer links left out (each answers for a player, like a
    password; the replay sends the stored document, links included)."""
    if isinstance(value, dict):
        return {key: HIDDEN if key == "answer" else _links_hidden(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_links_hidden(item) for item in value]
    return value


HIDDEN = "(signed answer links, not shown)"


def _local(iso: str) -> str:
    """The letter's ISO time as every date in the admin reads: the person's zone, with it."""
    try:
        instant = datetime.fromisoformat(iso)
    except ValueError:
        return iso
    if timezone.is_naive(instant):
        return iso
    shown = timezone.localtime(instant)
    return f"{shown:%a %Y-%m-%d %H:%M:%S} {shown.tzname()}"


def _int(value: Any) -> int | None:
    return int(value) if str(value).isdigit() else None


def _uuid(value: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(value)
    except ValueError:
        return None


@require_POST
def dead_letters_replay_view(request: HttpRequest) -> HttpResponse:
    """Replay the posted keys (`key`, repeated) or, with `all`, every dead letter read."""
    require_operator(request)
    keys = None if request.POST.get("all") else set(request.POST.getlist("key"))
    if keys is not None and not keys:
        messages.error(request, "Choose the pushes to replay.")
        return HttpResponseRedirect(reverse("admin-dead-letters"))
    try:
        done = dead_letters_replay(keys=keys, limit=PAGE_LIMIT)
    except ReplayRefused as exc:
        messages.error(request, str(exc))
    else:
        messages.success(
            request, f"{done.replayed} push(es) put back on the push queue; the gateway sends them again."
        )
    return HttpResponseRedirect(reverse("admin-dead-letters"))
