"""Where `make run` serves the site: ADDR (host:port, default 127.0.0.1:8000), as scripts/run-all.sh uses it,
so the links the development commands print are the ones that work."""

from __future__ import annotations

import os

DEFAULT_ADDR = "127.0.0.1:8000"


def site_url(path: str = "/") -> str:
    addr = os.environ.get("ADDR", "").strip() or DEFAULT_ADDR
    if addr.isdigit():  # runserver accepts a bare port
        addr = f"127.0.0.1:{addr}"
    if addr.startswith("0.0.0.0:"):  # listening everywhere: link to this machine
        addr = "127.0.0.1:" + addr.split(":", 1)[1]
    return f"http://{addr}{path}"
