"""`answer.recorded` for every answer an answer link records (a push's or an email's link, the email's
answer page, the app's own screen): the outermost recording call sends the event for an answer that
changed, in the answer's transaction (trainings/webhooks/events.py). A coach's answers, through the admin
or the API, send theirs from trainings/planning/writes.py."""

from __future__ import annotations

import functools
from collections.abc import Callable
from contextlib import nullcontext
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, TypeVar, cast

from django.db import transaction

from trainings.models import WebhookEvent
from trainings.webhooks.events import answer_recorded, subscribers

if TYPE_CHECKING:
    from trainings.answers.reading import LinkTarget
    from trainings.answers.recording import Recorded

_F = TypeVar("_F", bound=Callable[..., Any])
_recording: ContextVar[bool] = ContextVar("answer_recording", default=False)


def answer_events(record: _F) -> _F:
    """Wrap a link's recording function (it returns a `Recorded`, or `(target, Recorded)`; its target is
    its `target` argument otherwise). One transaction for the answer and its events, when anyone
    subscribes; nothing more when no one does."""

    @functools.wraps(record)
    def recording(*args: Any, **kwargs: Any) -> Any:
        if _recording.get():  # called by another recording function: that one sends the event
            return record(*args, **kwargs)
        token = _recording.set(True)
        try:
            subscribed = bool(subscribers(WebhookEvent.ANSWER_RECORDED))
            with transaction.atomic() if subscribed else nullcontext():
                result = record(*args, **kwargs)
                target, recorded = result if isinstance(result, tuple) else (kwargs["target"], result)
                if subscribed and recorded.changed:
                    _answer_sent(target, recorded)
            return result
        finally:
            _recording.reset(token)

    return cast(_F, recording)


def _answer_sent(target: LinkTarget, recorded: Recorded) -> None:
    link, answer = target.link, recorded.answer
    value = {"response": answer["response"]} if "response" in answer else {"answers": answer["answers"]}
    answer_recorded(
        training=target.training,
        player_id=link.player_id,
        guardian_id=link.guardian_id,
        kind=link.kind,
        answer=value,
        source=answer.get("source"),
        at=answer.get("at"),
    )
