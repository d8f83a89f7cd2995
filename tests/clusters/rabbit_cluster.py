"""A private 3-node RabbitMQ cluster on loopback ports, for the cluster fault scenarios.

Never the machine's shared broker: each node is this test run's own `rabbitmq-server` (RabbitMQ as
installed, the management plugin off), named `rt<pid>n<i>@localhost`, with its own AMQP and distribution
ports, its own data and log folders under a temporary directory and an Erlang cookie made for the run.
Nodes 2 and 3 join node 1 (`rabbitmqctl join_cluster`). `kill(i)` is `kill -9` of a node's Erlang VM;
`stop()` kills whatever is left and removes the folders.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

SERVER = "/usr/lib/rabbitmq/bin/rabbitmq-server"
CTL = "/usr/lib/rabbitmq/bin/rabbitmqctl"


def rabbitmq_installed() -> bool:
    return Path(SERVER).exists() and Path(CTL).exists()


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class Node:
    index: int
    name: str
    port: int
    dist_port: int
    base: Path
    process: subprocess.Popen[bytes] | None = None
    killed: bool = False

    @property
    def url(self) -> str:
        return f"amqp://guest:guest@127.0.0.1:{self.port}//"

    @property
    def pid_file(self) -> Path:
        return self.base / "node.pid"

    def beam_pid(self) -> int | None:
        try:
            return int(self.pid_file.read_text().strip())
        except (OSError, ValueError):
            return None


class RabbitCluster:
    """Three nodes started side by side, clustered, each with its own URL; `url` names all three."""

    def __init__(self, size: int = 3) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="reminders-rabbit-cluster-"))
        self.home = self.root / "home"  # the Erlang cookie the nodes and rabbitmqctl share
        self.home.mkdir()
        cookie = self.home / ".erlang.cookie"
        cookie.write_text(secrets.token_hex(20))
        cookie.chmod(0o400)
        self.nodes = [
            Node(i, f"rt{os.getpid()}n{i}@localhost", _free_port(), _free_port(), self.root / f"n{i}")
            for i in range(1, size + 1)
        ]

    @property
    def url(self) -> str:
        """Every node, in order, in kombu's failover syntax."""
        return ";".join(node.url for node in self.nodes)

    def url_of(self, *indexes: int) -> str:
        return ";".join(self.nodes[i - 1].url for i in indexes)

    def env(self, node: Node) -> dict[str, str]:
        return {
            **os.environ,
            "HOME": str(self.home),
            "RABBITMQ_NODENAME": node.name,
            "RABBITMQ_NODE_IP_ADDRESS": "127.0.0.1",
            "RABBITMQ_NODE_PORT": str(node.port),
            "RABBITMQ_DIST_PORT": str(node.dist_port),
            "RABBITMQ_CONFIG_FILE": str(node.base / "rabbitmq.conf"),
            "RABBITMQ_CONF_ENV_FILE": str(node.base / "rabbitmq-env.conf"),  # not the machine's
            "RABBITMQ_ENABLED_PLUGINS_FILE": str(node.base / "enabled_plugins"),  # none: no management
            "RABBITMQ_MNESIA_BASE": str(node.base / "mnesia"),
            "RABBITMQ_LOG_BASE": str(node.base / "log"),
            "RABBITMQ_PID_FILE": str(node.pid_file),
            "RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS": "-kernel inet_dist_use_interface {127,0,0,1}",
            "ERL_EPMD_ADDRESS": "127.0.0.1",
        }

    def start(self, timeout: float = 180) -> None:
        for node in self.nodes:
            (node.base / "mnesia").mkdir(parents=True)
            (node.base / "log").mkdir()
            # Quorum queues' own memory limits: small, this is a test on a shared machine.
            (node.base / "rabbitmq.conf").write_text(
                "loopback_users = none\nvm_memory_high_watermark.relative = 0.2\n"
            )
            (node.base / "rabbitmq-env.conf").write_text("")
            (node.base / "enabled_plugins").write_text("[].\n")
            node.process = subprocess.Popen(
                [SERVER],
                env=self.env(node),
                stdout=(node.base / "server.out").open("wb"),
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        for node in self.nodes:
            self._await(node, timeout)
        first = self.nodes[0]
        for node in self.nodes[1:]:
            self.ctl(node, "stop_app")
            self.ctl(node, "join_cluster", first.name)
            self.ctl(node, "start_app")
        for node in self.nodes:
            self._await(node, timeout)

    def _await(self, node: Node, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert node.process is not None
            if node.process.poll() is not None and node.beam_pid() is None:
                raise RuntimeError(f"{node.name} exited:\n{self.log_tail(node)}")
            if self._answers(node):
                return
            time.sleep(0.5)
        raise RuntimeError(f"{node.name} did not start within {timeout:.0f} s:\n{self.log_tail(node)}")

    def _answers(self, node: Node) -> bool:
        """Its AMQP port takes a connection and says AMQP (the listener starts once the node booted)."""
        try:
            with socket.create_connection(("127.0.0.1", node.port), timeout=1) as sock:
                sock.sendall(b"AMQP\x00\x00\x09\x01")
                return sock.recv(8)[:1] == b"\x01"  # connection.start frame
        except OSError:
            return False

    def ctl(self, node: Node, *args: str, timeout: float = 120) -> str:
        done = subprocess.run(
            [CTL, "-q", "-n", node.name, *args],
            env=self.env(node),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"rabbitmqctl {' '.join(args)} on {node.name}: {done.stdout}{done.stderr}")
        return done.stdout

    def connections(self, index: int) -> int:
        """Client connections open on this node now."""
        out = self.ctl(self.nodes[index - 1], "list_connections", "pid")
        return len([line for line in out.splitlines() if line.strip().startswith("<")])

    def kill(self, index: int) -> None:
        """kill -9 of the node's Erlang VM: its sockets close, its queue replicas stop, no goodbye."""
        node = self.nodes[index - 1]
        pid = node.beam_pid()
        assert pid is not None, f"{node.name} wrote no pid file"
        os.kill(pid, signal.SIGKILL)
        node.killed = True
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and self._answers(node):
            time.sleep(0.05)

    def log_tail(self, node: Node, lines: int = 30) -> str:
        texts = [
            p.read_text(errors="replace") for p in [node.base / "server.out", *node.base.glob("log/*.log")]
        ]
        return "\n".join("\n".join(text.splitlines()[-lines:]) for text in texts if text)

    def stop(self) -> None:
        for node in self.nodes:
            pid = node.beam_pid()
            if pid is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            if node.process is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(node.process.pid, signal.SIGKILL)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    node.process.wait(timeout=10)
        shutil.rmtree(self.root, ignore_errors=True)
