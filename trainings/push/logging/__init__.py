"""The logging stand-in (the development default, TRAININGS_PUSH_PROVIDER=logging): a push is
"delivered" to the log, so `make run` needs no credentials. Its row is in `trainings/push/channels.py`."""

from __future__ import annotations

import logging

from trainings.push.messages import PushMessage, PushProvider, SendResult, Target, Verdict

__all__ = ["LoggingProvider", "address_error", "from_settings"]

logger = logging.getLogger("trainings.push")


class LoggingProvider:
    name = "logging"

    def prepare(self) -> None:
        pass

    async def send(self, push: PushMessage, device: Target) -> SendResult:
        logger.info(
            "PUSH player=%s device=%s/%s kind=%s training=%s key=%s title=%r body=%r",
            push.player, device.provider, device.device_id, push.kind, push.training, push.idempotency_key,
            push.title, push.body,
        )  # fmt: skip
        return SendResult(Verdict.ACCEPTED)

    async def aclose(self) -> None:
        pass


def from_settings(*, in_flight: int) -> PushProvider | None:
    return LoggingProvider()


def address_error(address: str) -> str | None:
    return None  # a stand-in has no addresses of its own
