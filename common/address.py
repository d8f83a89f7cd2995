"""Where `make run` serves the site: ADDR (host:port, default 127.0.0.1:8000), as scripts/run-all.sh uses it,
so the links the development commands print are the ones that work.

A command run in a second terminal usually has no ADDR of its own: it then follows the running stack's,
which scripts/supervise.py writes to `served_addr_file()` while it runs.
"""

from __future__ import annotations

import os
from pathlib import Path

DEFAULT_ADDR = "127.0.0.1:8000"
SERVED_ADDR_NAME = "served-addr"


def served_addr_file() -> Path:
    """The file naming the address the running `make run` serves on (in REMINDERS_VAR_DIR, as the
    settings read it)."""
    var = os.environ.get("REMINDERS_VAR_DIR", "").strip()
    return (Path(var) if var else Path(__file__).resolve().parents[1] / "var") / SERVED_ADDR_NAME


def served_addr() -> str:
    """ADDR of this process's environment, else the running stack's, else the default."""
    addr = os.environ.get("ADDR", "").strip()
    if not addr:
        try:
            addr = served_addr_file().read_text().strip()
        except OSError:
            addr = ""
    return addr or DEFAULT_ADDR


def site_url(path: str = "/") -> str:
    addr = served_addr()
    if addr.isdigit():  # runserver accepts a bare port
        addr = f"127.0.0.1:{addr}"
    if addr.startswith("0.0.0.0:"):  # listening everywhere: link to this machine
        addr = "127.0.0.1:" + addr.split(":", 1)[1]
    return f"http://{addr}{path}"
