"""One push per family: a guardian's pushes for two or more of their players (or two reminders of one)
falling due in the same minute go out as one push document naming every child, with each child's reminder
in `family` (each with its own answer links, signed at publish; the gateway sends one email at most;
docs/escalation.md).

Where they are merged: at publish (`family_units`, called by trainings/publishing.py), among the pushes
one publish carries: the pushes of one occurrence (siblings on one team), of one due chunk (trainings
that start together mostly fire in one claim), and of one release. Reminders of the same minute that fire
in another chunk (another worker, a later claim) meet there through the gather window
(trainings/reminding/family_gather.py). Each child keeps their own `Push` row (their reminder, their answer
attribution); the family document travels under its first member's key, and the gateway records every
device outcome for each member.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from django.utils.translation import gettext_noop

from common.compact_json import json_compact
from common.i18n import spoken, translated
from trainings.models import Player

FAMILY_CATEGORY = "TRAINING_FAMILY"  # the app lists each child's actions (docs/app-contract.md)
FAMILY_TITLE = gettext_noop("Reminders for {names}")
FAMILY_LINE = gettext_noop("{name}: {title}. {body}")
# What the document says of each member (its email's lines and links, its outcomes, per child).
_MEMBER = ("idempotency_key", "player", "training", "kind", "rule", "offset", "title", "body", "expires_at")


class _Member(Protocol):
    @property
    def key(self) -> str: ...

    @property
    def guardian(self) -> int | None: ...

    @property
    def fire_at(self) -> datetime: ...


@dataclass(frozen=True)
class Unit:
    """A family's pushes going out as one push document."""

    lead: Any  # its first member (the document goes under its key and headers)
    members: tuple[str, ...]  # the push keys it carries
    body: bytes  # the family's document


def _minute(at: datetime) -> int:
    return int(at.timestamp() // 60)


def family_units(pending: Sequence[_Member], document: Callable[[Any], dict[str, Any]]) -> list[Any]:
    """`pending` in its order, each guardian's pushes of one minute (two or more) replaced, at the place
    of the first, by one Unit carrying them all; `document(push)` reads a push's published document."""
    groups: dict[tuple[int, int], list[_Member]] = {}
    for push in pending:
        if push.guardian is not None:
            groups.setdefault((push.guardian, _minute(push.fire_at)), []).append(push)
    families = {key: members for key, members in groups.items() if len(members) > 1}
    if not families:
        return list(pending)
    names = _names({int(document(p)["player"]) for members in families.values() for p in members})
    out: list[Any] = []
    for push in pending:
        members = families.get((push.guardian, _minute(push.fire_at))) if push.guardian is not None else None
        if members is None:
            out.append(push)
        elif members[0] is push:
            docs = [document(member) for member in members]
            out.append(Unit(push, tuple(m.key for m in members), json_compact(family_document(docs, names))))
    return out


def _names(players: set[int]) -> dict[int, str]:
    return dict(Player.objects.filter(pk__in=players).values_list("pk", "name"))


def family_document(members: list[dict[str, Any]], names: dict[int, str]) -> dict[str, Any]:
    """The one push document of a guardian's pushes: the first one's fields, a title and text naming every
    child in the guardian's language (their pushes were rendered in it), each member in `family` (with
    its email's answer links), and an `answer` whose push fields list every child with their links (the
    members' own, signed for this guardian: `answered`)."""
    lead = members[0]
    language = spoken(str(lead.get("language") or ""))
    children = list(dict.fromkeys(names.get(int(m["player"]), "?") for m in members))
    title = translated(language, FAMILY_TITLE).format(names=", ".join(children))
    lines = [
        translated(language, FAMILY_LINE).format(
            name=names.get(int(m["player"]), "?"), title=str(m["title"]).rstrip("."), body=m["body"]
        )
        for m in members
    ]
    expiries = [m["expires_at"] for m in members if m.get("expires_at")]
    document = {
        **lead,
        "title": title,
        "body": "\n".join(lines),
        "expires_at": max(expiries, key=datetime.fromisoformat) if expiries else None,
        "family": [_member(m, names.get(int(m["player"]), "")) for m in members],
    }
    answer: dict[str, Any] = {
        "push": {"category": FAMILY_CATEGORY, "family": [_child(m, names) for m in members]}
    }
    page = (lead.get("answer") or {}).get("page")
    if page:
        answer["page"] = page
    document["answer"] = answer
    if any(m.get("escalate") for m in members):
        document["escalate"] = True
    return document


def _member(member: dict[str, Any], name: str) -> dict[str, Any]:
    entry = {**{field: member.get(field) for field in _MEMBER}, "name": name}
    email = (member.get("answer") or {}).get("email")
    if email:
        entry["email"] = email
    return entry


def _child(member: dict[str, Any], names: dict[int, str]) -> dict[str, Any]:
    """A child's entry in a family push's fields: who, which reminder, and its link (no category: the
    push's is the family's)."""
    fields = {key: value for key, value in ((member.get("answer") or {}).get("push") or {}).items()
              if key != "category"}  # fmt: skip
    return {"player": str(member["player"]), "name": names.get(int(member["player"]), ""),
            "training": str(member["training"]), "kind": str(member["kind"]),
            "push": str(member["idempotency_key"]), **fields}  # fmt: skip


def document_of(message: dict[str, Any] | None, body: bytes | None) -> dict[str, Any]:
    """A pending push's published document: the stored message, or the body just built (decoded)."""
    if message is not None:
        return message
    assert body is not None
    decoded: dict[str, Any] = json.loads(body)
    return decoded
