"""The push providers against a second HTTP/2 server: granian (hyper's HTTP/2 and HPACK, rustls), answering
with the loopback peers' own checks (bench/peer_server.py, where the storm benchmark's peers run). The h2
peers answer with plain HPACK literals; hyper Huffman-codes its answers' values and indexes a `date`
header in its dynamic table, as production servers do, so this is where the client's Huffman decoding and
its copy of the server's table meet an encoder that is not ours."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.test import override_settings

from bench.peers import KEY_ID, TEAM_ID, TOPIC, ServedPeers, served_peers_start
from delivery.channels.apns import ApnsProvider
from delivery.channels.fcm import FcmProvider
from delivery.messages import PushMessage, PushProvider, SendResult, Target, Verdict
from tests.peers.credentials import apns_key


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedPeers]:
    workdir = tmp_path_factory.mktemp("served-peers")
    peers = served_peers_start(workdir, log_path=workdir / "granian.log")
    yield peers
    peers.stop()


def _push(i: int) -> PushMessage:
    return PushMessage.from_body({
        "schema": "trainings.push/2", "idempotency_key": f"served.{i}", "player": i, "title": "Questionnaire",
        "body": "Speed session at 6 p.m.", "language": "en", "training": str(uuid.uuid4()), "kind": "PRE",
        "rule": "pre-questionnaire", "expires_at": "2099-01-01T00:00:00+00:00",
    })  # fmt: skip


def _send_all(providers: dict[str, PushProvider], work: list[tuple[PushMessage, Target]]) -> list[SendResult]:
    async def main() -> list[SendResult]:
        try:
            return list(await asyncio.gather(*(providers[d.provider].send(p, d) for p, d in work)))
        finally:
            for provider in providers.values():
                await provider.aclose()

    return asyncio.run(main())


def _providers(served: ServedPeers, *, key_file: Path | None = None) -> dict[str, PushProvider]:
    with override_settings(PUSH_TLS_CA_FILE=str(served.ca_file)):
        return {
            "apns": ApnsProvider(key_file=str(key_file or served.key_path), key_id=KEY_ID, team_id=TEAM_ID,
                                 topic=TOPIC, base_url=served.url),
            "fcm": FcmProvider(credentials_file=str(served.account), base_url=served.url),
        }  # fmt: skip


def test_every_push_is_accepted_and_each_answer_read_whole(served: ServedPeers) -> None:
    served.clear()
    providers = _providers(served)
    providers["fcm"].prepare()  # the OAuth grant, over HTTP/1.1 to the same server
    work = [
        (
            _push(i),
            Target(i, "apns", "ios", f"{i:064x}") if i % 2 == 0 else Target(i, "fcm", "android", f"t{i}"),
        )
        for i in range(400)
    ]
    results = _send_all(providers, work)
    assert [r.verdict for r in results] == [Verdict.ACCEPTED] * 400
    # Each APNs answer's `apns-id` (Huffman-coded by hyper) decoded to the one this request sent.
    for (push, device), result in zip(work, results, strict=True):
        if device.provider == "apns":
            assert result.message_id == device.send_uuid(push)
    fcm_names = {r.message_id for (_, d), r in zip(work, results, strict=True) if d.provider == "fcm"}
    assert len(fcm_names) == 200 and all(n.startswith("projects/bench-project/messages/") for n in fcm_names)
    assert len(served.accepted()) == 400


def test_a_provider_token_signed_by_another_key_is_refused_as_credentials(
    served: ServedPeers, tmp_path: Path
) -> None:
    other_key, _ = apns_key(tmp_path)
    providers = _providers(served, key_file=other_key)
    [result] = _send_all({"apns": providers["apns"]}, [(_push(1), Target(1, "apns", "ios", f"{1:064x}"))])
    assert result.verdict == Verdict.AUTH and "InvalidProviderToken" in result.error
