"""A delivery channel added as a new one is, for the tests only: this folder and its line in the channels'
table (tests/trainings/test_channel_registry.py adds the line). "SMS": an address is a phone number in
E.164 form; the service is an in-process outbox that accepts any number but the dead ones."""

from __future__ import annotations

import re

from delivery.messages import PushMessage, PushProvider, SendResult, Target, Verdict

__all__ = ["DEAD_NUMBERS", "OUTBOX", "SmsProvider", "address_error", "from_settings"]

_E164 = re.compile(r"^\+[1-9][0-9]{6,14}$")
OUTBOX: list[tuple[str, str]] = []  # (number, text) the service took
DEAD_NUMBERS: set[str] = set()  # numbers the service says no longer exist


class SmsProvider:
    name = "sms"

    def prepare(self) -> None:
        pass

    async def send(self, push: PushMessage, device: Target) -> SendResult:
        if device.token in DEAD_NUMBERS:
            return SendResult(Verdict.TOKEN_DEAD, error="number no longer exists")
        OUTBOX.append((device.token, f"{push.title}: {push.body}"))
        return SendResult(Verdict.ACCEPTED, message_id=f"sms-{len(OUTBOX)}")

    async def aclose(self) -> None:
        pass


def from_settings(*, in_flight: int) -> PushProvider | None:
    return SmsProvider()


def address_error(address: str) -> str | None:
    return None if _E164.match(address) else "a phone number in E.164 form, e.g. +33612345678."
