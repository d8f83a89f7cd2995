"""The loopback APNs and FCM peers a bench scenario pushes to, started once with the settings the push
gateway needs to reach them. The push and storm scenarios both use it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.harness import Harness

KEY_ID = "BENCHKEY01"
TEAM_ID = "BENCHTEAM1"
TOPIC = "com.example.bench"
PROJECT_ID = "bench-project"


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
        return {
            "PUSH_APNS_BASE_URL": self.apns.url,
            "PUSH_APNS_KEY_FILE": str(self.key_path),
            "PUSH_APNS_KEY_ID": KEY_ID,
            "PUSH_APNS_TEAM_ID": TEAM_ID,
            "PUSH_APNS_TOPIC": TOPIC,
            "PUSH_TLS_CA_FILE": str(self.apns.ca_file),
            "PUSH_FCM_BASE_URL": self.fcm.url,
            "PUSH_FCM_CREDENTIALS_FILE": str(self.account),
        }

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
    from trainings.push.peers import ApnsPeer, FcmPeer, apns_key, service_account

    workdir = Path(h.log_dir) / name
    workdir.mkdir(parents=True, exist_ok=True)
    key_path, public_key = apns_key(workdir)
    apns = ApnsPeer(workdir, public_key=public_key, key_id=KEY_ID, team_id=TEAM_ID, topic=TOPIC, record=False)
    fcm = FcmPeer(workdir, project_id=PROJECT_ID, record=False)
    account, account_key = service_account(workdir, token_uri=fcm.token_uri, project_id=PROJECT_ID)
    fcm.trust(account_key)
    return Peers(apns, fcm, key_path, account)
