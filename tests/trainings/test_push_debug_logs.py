"""With LOG_LEVEL=DEBUG the protocol libraries under the providers (hpack, h2, httpx, httpcore, google-auth,
urllib3) must not write the credentials they carry: the APNs provider JWT, the FCM access token, the
service account's signed grant."""

from __future__ import annotations

import copy
import logging
import logging.config
from collections.abc import Iterator
from typing import Any

import pytest

from delivery.channels.apns import ApnsProvider
from delivery.channels.fcm import FcmProvider
from delivery.channels.providers import providers_from_settings
from delivery.gateway.consumer import Outcome, PushSender
from tests.factories import DeviceFactory, PlayerFactory
from tests.peers.apns_fcm import ApnsPeer, FcmPeer
from tests.trainings.push_fixtures import message

pytestmark = pytest.mark.django_db


class Everything(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(f"{record.levelname} {record.name} {record.getMessage()}")


@pytest.fixture
def debug_logs(settings: Any) -> Iterator[Everything]:
    """The project's logging as LOG_LEVEL=DEBUG configures it, every record kept."""
    config = copy.deepcopy(settings.LOGGING)
    config["root"]["level"] = "DEBUG"
    logging.config.dictConfig(config)
    handler = Everything()
    logging.getLogger().addHandler(handler)
    try:
        yield handler
    finally:
        logging.getLogger().removeHandler(handler)
        logging.config.dictConfig(settings.LOGGING)


def test_no_credential_reaches_the_log_at_debug(apns: ApnsPeer, fcm: FcmPeer, debug_logs: Everything) -> None:
    player = PlayerFactory(devices=[])
    DeviceFactory(player=player, provider="apns", platform="ios", token="b" * 64)
    DeviceFactory(player=player, provider="fcm", platform="android", token="android-debug")
    sender = PushSender(providers_from_settings())
    try:
        [handled] = sender.handle([message("occ.debug", player.pk)])
        apns_provider = sender.providers.by_device["apns"]
        fcm_provider = sender.providers.by_device["fcm"]
        assert isinstance(apns_provider, ApnsProvider) and isinstance(fcm_provider, FcmProvider)
        secrets = {
            "APNs JWT": apns_provider.provider_token(),
            "FCM access token": fcm_provider.credentials.token,
        }
    finally:
        sender.close()
    assert handled.outcome == Outcome.DELIVERED
    assert any(line.startswith("DEBUG ") for line in debug_logs.lines)  # DEBUG records did reach the log
    for what, secret in secrets.items():
        assert secret and len(secret) > 20
        # The JWT's signature alone is as good as the whole: look for every part of it.
        for part in str(secret).split("."):
            leaked = [line[:120] for line in debug_logs.lines if part in line]
            assert not leaked, f"the {what} is in the log: {leaked[:3]}"
