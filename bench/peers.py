"""The loopback APNs and FCM peers a bench scenario pushes to, started once with the settings the push
gateway needs to reach them: in this process on h2 (`peers_start`, the push scenario, which reads their
counts), or in a granian process of their own (`served_peers_start`, the storm, whose CPU per push they
must not share: bench/peer_server.py)."""

from __future__ import annotations

import json
import os
import socket
import ssl
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.harness import Harness
from bench.processes import start_process, stop_process
from tests.peers.apns_fcm import ApnsPeer, FcmPeer
from tests.peers.credentials import apns_key, service_account, tls_certificate

KEY_ID = "BENCHKEY01"
TEAM_ID = "BENCHTEAM1"
TOPIC = "com.example.bench"
PROJECT_ID = "bench-project"


def gateway_env(apns_url: str, fcm_url: str, key_path: Path, account: Path, ca_file: Path) -> dict[str, str]:
    """The gateway's settings (environment) that send to peers at these addresses."""
    return {
        "PUSH_APNS_BASE_URL": apns_url,
        "PUSH_APNS_KEY_FILE": str(key_path),
        "PUSH_APNS_KEY_ID": KEY_ID,
        "PUSH_APNS_TEAM_ID": TEAM_ID,
        "PUSH_APNS_TOPIC": TOPIC,
        "PUSH_TLS_CA_FILE": str(ca_file),
        "PUSH_FCM_BASE_URL": fcm_url,
        "PUSH_FCM_CREDENTIALS_FILE": str(account),
    }


@dataclass
class Peers:
    """Both peers, the APNs signing key and the FCM service account they trust."""

    apns: Any
    fcm: Any
    key_path: Path
    account: Path

    @property
    def env(self) -> dict[str, str]:
        """The gateway's settings (environment) that send to these peers."""
        return gateway_env(self.apns.url, self.fcm.url, self.key_path, self.account, self.apns.ca_file)

    def accepted(self) -> list[float]:
        """When each accepted push arrived, both peers together, earliest first."""
        return sorted(self.apns.accepted_at + self.fcm.accepted_at)

    def clear(self) -> None:
        self.apns.accepted_at.clear()
        self.fcm.accepted_at.clear()

    def stop(self) -> None:
        self.apns.stop()
        self.fcm.stop()


def peers_start(h: Harness, name: str) -> Peers:
    """Start both peers with their keys under the run's log directory (`name` is the folder)."""
    workdir = Path(h.log_dir) / name
    workdir.mkdir(parents=True, exist_ok=True)
    key_path, public_key = apns_key(workdir)
    apns = ApnsPeer(workdir, public_key=public_key, key_id=KEY_ID, team_id=TEAM_ID, topic=TOPIC, record=False)
    fcm = FcmPeer(workdir, project_id=PROJECT_ID, record=False)
    account, account_key = service_account(workdir, token_uri=fcm.token_uri, project_id=PROJECT_ID)
    fcm.trust(account_key)
    return Peers(apns, fcm, key_path, account)


@dataclass
class ServedPeers:
    """Both peers in one granian process on one port (APNs and FCM told apart by their paths)."""

    process: Any
    url: str
    key_path: Path
    account: Path
    ca_file: Path

    @property
    def env(self) -> dict[str, str]:
        return gateway_env(self.url, self.url, self.key_path, self.account, self.ca_file)

    def _call(self, method: str, path: str) -> bytes:
        context = ssl.create_default_context(cafile=str(self.ca_file))
        data = b"" if method == "POST" else None
        request = urllib.request.Request(self.url + path, method=method, data=data)  # noqa: S310 (https)
        with urllib.request.urlopen(request, context=context, timeout=30) as answer:  # noqa: S310 (https)
            return bytes(answer.read())

    def accepted(self) -> list[float]:
        return [float(t) for t in json.loads(self._call("GET", "/_peers/accepted"))]

    def clear(self) -> None:
        self._call("POST", "/_peers/clear")

    def quota_set(self, per_minute: int) -> None:
        """The FCM peer enforces a project quota of `per_minute` sends a minute from now on (0: none)."""
        self._call("POST", f"/_peers/quota/{per_minute}")

    def quota_log(self) -> list[tuple[float, int]]:
        """(wall time, status) of each FCM send since the quota was set."""
        return [(float(at), int(code)) for at, code in json.loads(self._call("GET", "/_peers/quota"))]

    def stop(self) -> None:
        stop_process(self.process, grace=5.0)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def served_peers_start(workdir: Path, *, log_path: Path) -> ServedPeers:
    """Both peers in a granian process (one worker, one runtime thread), their keys and certificate in
    `workdir`, its output in `log_path`. Stop it with `stop()`."""

    workdir.mkdir(parents=True, exist_ok=True)
    port = _free_port()
    url = f"https://127.0.0.1:{port}"
    key_path, _ = apns_key(workdir)
    account, _ = service_account(workdir, token_uri=f"{url}/token", project_id=PROJECT_ID)
    cert, key = tls_certificate(workdir)
    env = {**os.environ, "PEERS_DIRECTORY": str(workdir), "PEERS_APNS_KEY_ID": KEY_ID,
           "PEERS_APNS_TEAM_ID": TEAM_ID, "PEERS_APNS_TOPIC": TOPIC}  # fmt: skip
    process = start_process(
        [sys.executable, "-m", "granian", "--interface", "rsgi", "--http", "auto", "--host", "127.0.0.1",
         "--port", str(port), "--workers", "1", "--runtime-threads", "1", "--no-access-log",
         "--http2-max-concurrent-streams", "1000", "--ssl-certificate", str(cert), "--ssl-keyfile", str(key),
         "bench.peer_server:app"],
        env=env, log_path=log_path,
    )  # fmt: skip
    peers = ServedPeers(process, url, key_path, account, cert)
    deadline = time.monotonic() + 60
    while True:
        try:
            peers.clear()
            return peers
        except OSError as exc:
            if process.poll() is not None or time.monotonic() > deadline:
                peers.stop()
                raise RuntimeError(f"the granian peers did not start (see {log_path}): {exc}") from exc
            time.sleep(0.2)
