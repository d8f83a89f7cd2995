"""The project quota the loopback FCM peer enforces, as FCM does per project: `limit` sends in each window
of `window` seconds (aligned on Unix time, as FCM's minutes are), then 429 RESOURCE_EXHAUSTED with
Google's quota details and a Retry-After until the window ends. Every send it counts is logged."""

from __future__ import annotations

import math
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any


@dataclass
class WindowQuota:
    limit: int
    window: float = 60.0
    retry_after: bool = True  # say when the window ends (FCM may leave it out)
    log: list[tuple[float, str, int]] = field(default_factory=list)  # (wall time, token, status)
    _counts: Counter[int] = field(default_factory=Counter)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def refuse(self, token: str) -> tuple[int, list[tuple[str, str]], Any] | None:
        """Count a send; the 429 answer (status, headers, document) when it is over the window's limit."""
        now = time.time()
        with self._lock:
            window = int(now // self.window)
            self._counts[window] += 1
            over = self._counts[window] > self.limit
            self.log.append((now, token, 429 if over else 200))
        if not over:
            return None
        left = (window + 1) * self.window - now
        headers = [("retry-after", str(math.ceil(left)))] if self.retry_after else []
        message = "Quota exceeded for quota metric 'Send requests' and limit 'Send requests per minute'"
        info = "type.googleapis.com/google.rpc.ErrorInfo"
        details = [{"@type": info, "reason": "RATE_LIMIT_EXCEEDED", "domain": "googleapis.com",
                    "metadata": {"quota_metric": "fcm.googleapis.com/send"}}]  # fmt: skip
        return 429, headers, {"error": {"code": 429, "message": message, "status": "RESOURCE_EXHAUSTED",
                                        "details": details}}  # fmt: skip

    def per_window(self, status: int = 200) -> Counter[int]:
        """Sends answered `status` per window."""
        with self._lock:
            return Counter(int(at // self.window) for at, _, s in self.log if s == status)
