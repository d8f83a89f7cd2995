"""A PostgreSQL primary and its streaming standby of our own, for the failover scenarios.

Made from PostgreSQL 15's binaries (PG_BIN) on free loopback ports (and any extra listen addresses, such as
the veth side of a network namespace), in a temporary directory owned by the postgres user: never the
machine's shared cluster. `PgTemplate` initialises and migrates one data directory per test session;
each `PgPair` copies it to a primary, clones a standby with `pg_basebackup -R` (asynchronous streaming
replication, as a managed standby runs by default) and is removed with both after its test.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import psycopg

from bench.processes import ROOT

PG_BIN = Path(os.environ.get("PG_BIN", "/usr/lib/postgresql/15/bin"))
DATABASE = "reminders"
_USER = "postgres"  # initdb refuses root; the clusters run as the postgres system user

# Settings of the scenario clusters: asynchronous replication (the default), a WAL sender per standby,
# the standby readable, fsync off (the machine does not crash in these tests, only PostgreSQL does, and the
# OS keeps what was written), and enough connections for the processes of a scenario.
_CONF = """
listen_addresses = '{listen}'
port = {port}
unix_socket_directories = '{socket_dir}'
wal_level = replica
max_wal_senders = 5
hot_standby = on
fsync = off
full_page_writes = on
max_connections = {max_connections}
wal_keep_size = 256MB
log_min_messages = warning
logging_collector = off
"""


def available() -> bool:
    return (PG_BIN / "initdb").exists() and os.geteuid() == 0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _as_postgres(argv: Sequence[str], *, check: bool = True, timeout: float = 120) -> str:
    result = subprocess.run(
        ["runuser", "-u", _USER, "--", *argv], capture_output=True, text=True, timeout=timeout, check=False
    )
    if check and result.returncode != 0:
        raise RuntimeError(
            f"{' '.join(argv)} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}"
        )
    return result.stdout


def _owned_tmpdir(prefix: str) -> Path:
    path = Path(tempfile.mkdtemp(prefix=prefix))
    entry = pwd.getpwnam(_USER)
    os.chown(path, entry.pw_uid, entry.pw_gid)
    return path


class Node:
    """One postgres server: its data directory, port and log."""

    def __init__(self, data: Path, port: int, listen: Iterable[str], max_connections: int) -> None:
        self.data, self.port = data, port
        self.listen = ["127.0.0.1", *listen]
        self.max_connections = max_connections
        self.log = data.parent / f"{data.name}.log"

    def configure(self) -> None:
        conf = _CONF.format(
            listen=",".join(self.listen),
            port=self.port,
            socket_dir=self.data.parent,
            max_connections=self.max_connections,
        )
        _as_postgres(["sh", "-c", f"cat >> '{self.data}/postgresql.conf' <<'EOF'\n{conf}\nEOF"])

    def start(self) -> None:
        _as_postgres(
            [str(PG_BIN / "pg_ctl"), "-D", str(self.data), "-l", str(self.log), "-w", "-t", "60", "start"]
        )

    def stop(self, mode: str = "fast") -> None:
        _as_postgres([str(PG_BIN / "pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "stop"], check=False)

    def promote(self) -> None:
        _as_postgres([str(PG_BIN / "pg_ctl"), "-D", str(self.data), "-w", "promote"])

    def running(self) -> bool:
        return (self.data / "postmaster.pid").exists()

    def connect(self, dbname: str = DATABASE, **kwargs: Any) -> psycopg.Connection[tuple[Any, ...]]:
        return psycopg.connect(
            host="127.0.0.1",
            port=self.port,
            user=_USER,
            dbname=dbname,
            autocommit=True,
            connect_timeout=5,
            **kwargs,
        )

    def value(self, sql: str, params: Sequence[Any] = (), dbname: str = DATABASE) -> Any:
        with contextlib.closing(self.connect(dbname)) as conn:
            cursor = conn.execute(sql, params or None)
            row = cursor.fetchone() if cursor.description else None
            return row[0] if row else None

    def log_tail(self, lines: int = 20) -> str:
        if not self.log.exists():
            return ""
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])


class PgTemplate:
    """A data directory with the project's schema migrated into DATABASE, made once per test session."""

    def __init__(self) -> None:
        self.root = _owned_tmpdir("reminders-pg-")
        node = Node(self.root / "template", free_port(), [], 50)
        _as_postgres(
            [
                str(PG_BIN / "initdb"),
                "-D",
                str(node.data),
                "-U",
                _USER,
                "--auth=trust",
                "--no-sync",
                "-E",
                "UTF8",
            ]
        )
        node.configure()
        _as_postgres(
            ["sh", "-c", f"echo 'host replication all 0.0.0.0/0 trust' >> '{node.data}/pg_hba.conf'"]
        )
        _as_postgres(["sh", "-c", f"echo 'host all all 0.0.0.0/0 trust' >> '{node.data}/pg_hba.conf'"])
        node.start()
        try:
            node.value(f"CREATE DATABASE {DATABASE}", dbname="postgres")
            env = {**os.environ, "DATABASE_URL": f"postgres://{_USER}@127.0.0.1:{node.port}/{DATABASE}"}
            env.pop("CELERY_BROKER_URL", None)
            subprocess.run(
                [sys.executable, "manage.py", "migrate", "--noinput"],
                cwd=ROOT,
                env=env,
                check=True,
                capture_output=True,
                timeout=600,
            )
        finally:
            node.stop()
        self.data = node.data

    def remove(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


class PgPair:
    """A primary (copied from the template) and a streaming standby of it, both running."""

    def __init__(
        self,
        template: PgTemplate,
        *,
        listen: Iterable[str] = (),
        max_connections: int = 100,
        standby: bool = True,
    ) -> None:
        self.root = _owned_tmpdir("reminders-pair-")
        listen = list(listen)
        self.primary = Node(self.root / "primary", free_port(), listen, max_connections)
        _as_postgres(["cp", "-a", str(template.data), str(self.primary.data)])
        _as_postgres(["rm", "-f", str(self.primary.data / "postmaster.pid")])
        # The template's own settings are appended last, so these win.
        self.primary.configure()
        self.primary.start()
        self.standby: Node | None = None
        if standby:
            self.standby = Node(self.root / "standby", free_port(), listen, max_connections)
            _as_postgres(
                [str(PG_BIN / "pg_basebackup"), "-h", "127.0.0.1", "-p", str(self.primary.port), "-U", _USER,
                 "-D", str(self.standby.data), "-R", "-X", "stream", "--no-sync"]
            )  # fmt: skip
            self.standby.configure()
            self.standby.start()
            self.wait_streaming()

    def wait_streaming(self, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while self.primary.value("SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'") < 1:
            if time.monotonic() > deadline:
                raise RuntimeError(
                    "the standby never streamed:\n" + (self.standby.log_tail() if self.standby else "")
                )
            time.sleep(0.2)

    def url(
        self, application_name: str = "", *, hosts: Sequence[str] = ("127.0.0.1",), **options: str
    ) -> str:
        """libpq's multi-host URL: the primary, then the standby; a client keeps the read-write one."""
        nodes = [self.primary, *([self.standby] if self.standby else [])]
        addresses = ",".join(f"{host}:{node.port}" for node in nodes for host in hosts)
        query = {"target_session_attrs": "read-write", "connect_timeout": "3", **options}
        if application_name:
            query["application_name"] = application_name
        return f"postgres://{_USER}@{addresses}/{DATABASE}?" + "&".join(f"{k}={v}" for k, v in query.items())

    def current(self) -> Node:
        """The node that is read-write now."""
        for node in (self.primary, self.standby):
            if node is not None and node.running():
                with contextlib.suppress(psycopg.Error):
                    if not node.value("SELECT pg_is_in_recovery()"):
                        return node
        raise RuntimeError("no primary is running")

    def fail_over(self) -> float:
        """`pg_ctl stop -m immediate` of the primary, then `pg_ctl promote` of the standby; the seconds it
        took until the standby answers read-write."""
        assert self.standby is not None
        started = time.monotonic()
        self.primary.stop("immediate")
        self.standby.promote()
        while self.standby.value("SELECT pg_is_in_recovery()"):
            time.sleep(0.05)
        return time.monotonic() - started

    def remove(self) -> None:
        for node in (self.primary, self.standby):
            if node is not None and node.running():
                node.stop("immediate")
        shutil.rmtree(self.root, ignore_errors=True)
