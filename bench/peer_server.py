"""The loopback APNs and FCM peers on a compiled HTTP/2 stack: granian (hyper and rustls) in a process of its
own, answering with the same checks and answers as tests/peers/apns_fcm.py (its peers, built without a
server, answer each request here).

Why: on this machine's two cores the stand-ins for Apple's and Google's servers share the cores with the
path the storm measures. h2's pure-Python server in the benchmark's process cost more CPU a push than the
gateway itself, so the gateway-to-peers rate measured the peers as much as the gateway. Here the framing,
HPACK and TLS are compiled; what stays in Python is the peers' own checks. The tests keep the h2 peers,
an independent implementation of the protocol the gateway's own framing is checked against.

Run by `bench.peers.served_peers_start`, with the settings in the environment (`PEERS_*`); it needs no
Django settings. Besides the providers' endpoints, `GET /_peers/accepted` returns when each accepted push
arrived (wall clock, both peers) and `POST /_peers/clear` forgets them; `POST /_peers/quota/<N>` makes the
FCM peer enforce a project quota of N sends a minute (0: none, tests/peers/quota.py) and `GET /_peers/quota`
returns its log (wall time, status) of the FCM sends since.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives import serialization

from tests.peers.apns_fcm import ApnsPeer, FcmPeer
from tests.peers.quota import WindowQuota


def _peers() -> tuple[ApnsPeer, FcmPeer]:
    directory = Path(os.environ["PEERS_DIRECTORY"])
    apns_key = serialization.load_pem_private_key((directory / "AuthKey.p8").read_bytes(), None)
    account = json.loads((directory / "service-account.json").read_text())
    account_key = serialization.load_pem_private_key(account["private_key"].encode(), None)
    apns = ApnsPeer(directory, public_key=apns_key.public_key(), key_id=os.environ["PEERS_APNS_KEY_ID"],
                    team_id=os.environ["PEERS_APNS_TEAM_ID"], topic=os.environ["PEERS_APNS_TOPIC"],
                    record=False, serve=False)  # fmt: skip
    fcm = FcmPeer(directory, project_id=account["project_id"], record=False, serve=False)
    fcm.token_uri = account["token_uri"]
    fcm.trust(account_key.public_key())
    return apns, fcm


APNS, FCM = _peers()
_JSON = [("content-type", "application/json")]


async def app(scope: Any, protocol: Any) -> None:
    """granian's RSGI entry point: one request, answered by the peer its path names."""
    body = await protocol()
    path = scope.path
    headers = dict(scope.headers.items())
    headers[":path"], headers[":method"] = path, scope.method
    if path.startswith("/3/device/"):
        status, extra, answer = APNS._h2_answer(headers, body)
    elif path == "/_peers/accepted":
        stamps = sorted(APNS.accepted_at + FCM.accepted_at)
        status, extra, answer = 200, _JSON, json.dumps(stamps).encode()
    elif path.startswith("/_peers/quota/"):
        limit = int(path.rsplit("/", 1)[1])
        FCM.quota = WindowQuota(limit=limit, window=60.0) if limit > 0 else None
        status, extra, answer = 204, [], b""
    elif path == "/_peers/quota":
        log = [(at, code) for at, _, code in FCM.quota.log] if FCM.quota else []
        status, extra, answer = 200, _JSON, json.dumps(log).encode()
    elif path == "/_peers/clear":
        APNS.accepted_at.clear()
        FCM.accepted_at.clear()
        status, extra, answer = 204, [], b""
    else:
        status, extra, answer = FCM._h2_answer(headers, body)
    protocol.response_bytes(status, extra, answer)
