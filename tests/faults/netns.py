"""Hosts for the fault suite: one network namespace per host, joined to this machine by a veth pair.

`Host("a", 1)` makes the namespace `rmd-<pid>-a` and a veth pair on 10.231.<n>.0/30: the machine's side
is `gateway` (10.231.<n>.1), where the database and the broker are reached, the host's side `address`
(10.231.<n>.2). A process started with `host.wrap` (`ip netns exec ...`) sees only that link, so
`partition()` (the host's side of the link set down) cuts it off from everything, as a pulled cable or a
failed switch port would: packets are dropped, nothing is reset. `heal()` brings the link back; `remove()`
deletes the namespace and the pair.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path


def available() -> bool:
    return os.geteuid() == 0 and shutil.which("ip") is not None


def _ip(*args: str, check: bool = True) -> None:
    subprocess.run(["ip", *args], check=check, capture_output=True, timeout=10)


class Host:
    def __init__(self, name: str, number: int) -> None:
        self.netns = f"rmd-{os.getpid() % 100000}-{name}"
        self.outside = f"rmd{os.getpid() % 100000}{name}o"[:15]
        self.inside = f"rmd{os.getpid() % 100000}{name}i"[:15]
        self.gateway = f"10.231.{number}.1"
        self.address = f"10.231.{number}.2"
        self.partitions = 0
        _ip("netns", "add", self.netns)
        try:
            _ip("link", "add", self.outside, "type", "veth", "peer", "name", self.inside)
            _ip("link", "set", self.inside, "netns", self.netns)
            _ip("addr", "add", f"{self.gateway}/30", "dev", self.outside)
            _ip("link", "set", self.outside, "up")
            _ip("-n", self.netns, "addr", "add", f"{self.address}/30", "dev", self.inside)
            _ip("-n", self.netns, "link", "set", self.inside, "up")
            _ip("-n", self.netns, "link", "set", "lo", "up")
        except BaseException:
            self.remove()
            raise

    @property
    def wrap(self) -> list[str]:
        """The command prefix that runs a process on this host."""
        return ["ip", "netns", "exec", self.netns]

    def partition(self) -> None:
        self.partitions += 1
        _ip("-n", self.netns, "link", "set", self.inside, "down")

    def heal(self) -> None:
        _ip("-n", self.netns, "link", "set", self.inside, "up")

    def name_localhost(self) -> None:
        """On this host `localhost` is the machine's side of the link (`ip netns exec` reads
        /etc/netns/<name>/hosts for /etc/hosts), so a loopback peer's certificate for localhost holds for a
        forwarder listening there."""
        folder = Path("/etc/netns") / self.netns
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "hosts").write_text(f"{self.gateway} localhost\n")

    def remove(self) -> None:
        _ip("link", "del", self.outside, check=False)  # takes its peer along
        _ip("netns", "del", self.netns, check=False)
        shutil.rmtree(Path("/etc/netns") / self.netns, ignore_errors=True)
