"""The gateway's side of one push per family (reminding/family.py builds the document): a family document
goes once to each of the guardian's addresses, carries an answer action or link per child, and every
outcome is recorded for each member push, so each child's reminder reads as reached (or not) like any other.

A member is (push key, player, training, kind): the family's `family` entries; a plain push is its own one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

from delivery.domain import DOMAIN

if TYPE_CHECKING:
    from delivery.messages import PushMessage

FAMILY_CATEGORY = "TRAINING_FAMILY"  # the app lists each child's actions (docs/app-contract.md)


class Member(NamedTuple):
    key: str
    player: int | None
    training: str
    kind: str


def members_parse(value: Any) -> tuple[Member, ...]:
    """The `family` entries of a push document (none: not a family's); ValueError for a malformed one."""
    if value is None:
        return ()
    if not isinstance(value, list) or len(value) < 2:
        raise ValueError("family: a list of two or more pushes")
    return tuple(
        Member(str(m["idempotency_key"]), int(m["player"]), str(m["training"]), str(m["kind"])) for m in value
    )


def members_of(push: PushMessage) -> tuple[Member, ...]:
    """Whose reminders this push carries: the family's members, or the push itself."""
    return push.family or (Member(push.idempotency_key, push.player, push.training, push.kind),)


def family_answer_fields(push: PushMessage) -> dict[str, Any]:
    """Per child: who, which training and kind, and that reminder's `answer_url` (and an invitation's
    `actions`), each link minted for this guardian and that child; the category says "a family's"."""
    children = []
    for entry in push.raw.get("family") or []:
        try:
            fields = DOMAIN.answer_fields(player_id=int(entry["player"]), training_id=str(entry["training"]),
                                        kind=str(entry["kind"]), guardian_id=push.guardian)  # fmt: skip
        except ValueError:  # not a training's id (a hand-made message): that child without a link
            fields = {}
        fields.pop("category", None)
        children.append({"player": str(entry["player"]), "name": str(entry.get("name") or ""),
                         "training": str(entry["training"]), "kind": str(entry["kind"]),
                         "push": str(entry["idempotency_key"]), **fields})  # fmt: skip
    return {"category": FAMILY_CATEGORY, "family": children}
