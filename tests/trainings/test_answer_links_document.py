"""The `answer` of a push document (trainings/answers/links.py): every link a push carries, signed once at
publish for its recipient and channel, so the gateway reads them and signs none; the encoded form the
storm publishes is the same JSON as the dictionary."""

from __future__ import annotations

import json
import uuid

import pytest

from common.compact_json import json_compact
from trainings.answers.links import _answer_of, answer_document, answer_json, answer_link_read

TRAINING = uuid.UUID("7d0c0a4e-0000-4000-8000-000000000000")


def _token(url: str) -> str:
    return url.split("?")[0].rstrip("/").rsplit("/", 1)[1]


@pytest.mark.parametrize("guardian", [None, 9])
def test_an_invitation_carries_its_push_links_and_its_email_links_for_its_recipient(
    guardian: int | None,
) -> None:
    answer = answer_document(player_id=5, training_id=TRAINING, kind="INVITATION", guardian_id=guardian)
    push = answer["push"]
    assert push["category"] == "TRAINING_INVITATION"
    assert [(a["id"], a["response"], a["url"]) for a in push["actions"]] == [
        ("accept", "accepted", push["answer_url"]), ("decline", "denied", push["answer_url"]),
    ]  # fmt: skip
    token = _token(push["answer_url"])
    assert answer["page"].endswith(f"/answer/{token}/")
    link = answer_link_read(token)
    assert (link.player_id, link.training_id, link.kind, link.guardian_id, link.source) == (
        5, TRAINING, "INVITATION", guardian, "push_action",
    )  # fmt: skip
    accept, decline = answer["email"]["accept"], answer["email"]["decline"]
    assert accept.endswith("?response=accepted") and decline.endswith("?response=denied")
    assert _token(accept) == _token(decline) != token
    email = answer_link_read(_token(accept))
    assert (email.player_id, email.kind, email.guardian_id, email.source) == (
        5,
        "INVITATION",
        guardian,
        "email_link",
    )


def test_a_questionnaire_has_one_email_link_and_a_notice_nothing() -> None:
    answer = answer_document(player_id=5, training_id=TRAINING, kind="PRE")
    assert set(answer["push"]) == {"category", "answer_url"} and set(answer["email"]) == {"answer"}
    assert answer_link_read(_token(answer["email"]["answer"])).source == "email_link"
    assert answer_document(player_id=5, training_id=TRAINING, kind="MOVED") == {}
    assert answer_json(player_id=5, training_id=TRAINING, kind="MOVED") == b""


@pytest.mark.parametrize("kind", ["PRE", "POST", "INVITATION"])
def test_the_encoded_answer_is_the_json_of_the_answer(kind: str) -> None:
    """`answer_json` fills a template encoded once per kind: the bytes `json_compact` makes of the same."""
    encoded = answer_json(player_id=5, training_id=TRAINING, kind=kind, guardian_id=9)
    answer = json.loads(encoded)
    tokens = _token(answer["push"]["answer_url"]), _token(next(iter(answer["email"].values())))
    assert encoded == json_compact(_answer_of(kind, *tokens))
    assert answer_link_read(tokens[1]).guardian_id == 9
