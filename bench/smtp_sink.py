"""`python -m bench.smtp_sink PORT`: an SMTP server on 127.0.0.1:PORT that accepts every message and keeps
nothing, in a process of its own so the SMTP clients a scenario compares are measured without its CPU.

It offers PIPELINING (RFC 2920) as Postfix and Exim do (aiosmtpd serves pipelined commands, it only does
not say so), and logs nothing per command. No Django here.
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
from typing import Any

from aiosmtpd.controller import Controller


class Sink:
    async def handle_EHLO(
        self, server: Any, session: Any, envelope: Any, hostname: str, responses: list[str]
    ) -> list[str]:
        session.host_name = hostname
        return [*responses[:-1], "250-PIPELINING", responses[-1]]

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        return "250 Message accepted"


def main() -> None:
    logging.getLogger("mail.log").setLevel(logging.WARNING)
    controller = Controller(Sink(), hostname="127.0.0.1", port=int(sys.argv[1]))
    controller.start()
    print(f"listening on 127.0.0.1:{controller.port}", flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    stop.wait()
    controller.stop()


if __name__ == "__main__":
    main()
