"""The logging stand-in (the development default, TRAININGS_PUSH_PROVIDER=logging): a push is
"delivered" to the log, so `make run` needs no credentials. Its row is in `delivery/channels/registry.py`.
Under DEBUG its PUSH line ends with the push's answer page (`answer=`), so a developer answers as the
player in one tap; never otherwise, since a link is a credential."""

from __future__ import annotations

import logging

from django.conf import settings

from delivery.messages import PushMessage, PushProvider, SendResult, Target, Verdict
from reminders.api import SHOWS_CREDENTIAL

__all__ = ["LoggingProvider", "address_error", "from_settings"]

logger = logging.getLogger("trainings.push")


class LoggingProvider:
    name = "logging"

    def prepare(self) -> None:
        pass

    async def send(self, push: PushMessage, device: Target) -> SendResult:
        debug = settings.DEBUG  # the link shows (past the logs' token redaction) in development only
        logger.info(
            "PUSH player=%s device=%s/%s kind=%s training=%s key=%s title=%r body=%r%s",
            push.player, device.provider, device.device_id, push.kind, push.training, push.idempotency_key,
            push.title, push.body, _answer_page(push) if debug else "", extra={SHOWS_CREDENTIAL: debug},
        )  # fmt: skip
        return SendResult(Verdict.ACCEPTED)

    async def aclose(self) -> None:
        pass


def _answer_page(push: PushMessage) -> str:
    page = push.answer_page  # none for a coach's digest or a notice: nothing to answer
    return f" answer={page}" if page else ""


def from_settings(*, in_flight: int) -> PushProvider | None:
    return LoggingProvider()


def address_error(address: str) -> str | None:
    return None  # a stand-in has no addresses of its own
