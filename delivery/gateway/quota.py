"""Provider quotas: every gateway, on every host, paces each provider project at its configured rate
(PUSH_FCM_QUOTA_PER_MINUTE, PUSH_APNS_QUOTA_PER_MINUTE), shared through the database (common/rates.py),
nearest expiry first; a 429 for the project pauses that project's sends once, until its window ends.

The `Pacer` lives on the sender's event loop. A send to a paced provider takes a token of the current
second; when there is none it is parked (it holds no in-flight slot, so another provider's sends go on)
in a heap ordered by its push's expiry, and one refill task per project takes the next share from the
database (in a thread of its own: the loop never waits for it) and hands that many parked sends back,
nearest expiry first. A quota refusal (`SendResult.quota`) pauses the project, for every gateway, until
the provider's Retry-After or else the end of its minute, and parks the send again: it is sent after the
pause, without counting as one of the push's retries. The gateway also takes the pushes it received
nearest expiry first (`by_expiry`), within its prefetch.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from django.db import connection

from common.rates import DatabaseRates, LocalRates, Rates

logger = logging.getLogger("delivery.gateway.consumer")

__all__ = ["Pacer", "by_expiry", "quota_of"]

_NEVER = float("inf")


def by_expiry(body: Any) -> str:
    """The sort key of a received push: its `expires_at` text (UTC ISO times sort as text), last when it
    has none."""
    value = body.get("expires_at") if isinstance(body, dict) else None
    return str(value) if value else "~"


def quota_of(provider: Any) -> tuple[str, int] | None:
    """(project key, sends a minute) of a provider with a quota; None when it has none."""
    key, per_minute = getattr(provider, "quota_key", ""), getattr(provider, "quota_per_minute", 0)
    return (key, per_minute) if key and per_minute > 0 else None


def _close_connection() -> None:
    connection.close()  # (resolved in the quota thread: its own connection)


@dataclass
class _Project:
    key: str
    per_minute: int
    second: int = -1
    tokens: int = 0  # left of `second`'s share taken by this gateway
    paused_until: float = 0.0  # Unix time
    parked: list[tuple[float, int, Any]] = field(default_factory=list)  # heap: (expiry, seq, send)
    refilling: bool = False
    pauses: int = 0

    @property
    def first_expiry(self) -> float:
        return self.parked[0][0] if self.parked else _NEVER


class Pacer:
    """Tokens per provider project for one sender's loop. `release(sends)` is told which parked sends may
    go now (each has its token)."""

    def __init__(
        self, release: Callable[[list[Any]], None], *, chunk: int, shared: bool | None = None
    ) -> None:
        if shared is None:
            shared = not connection.in_atomic_block  # a test's transaction: another thread would not see it
        self.rates: Rates = DatabaseRates() if shared else LocalRates()
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="push-quota") if shared else None
        self._release = release
        self.chunk = max(1, chunk)
        self._projects: dict[str, _Project] = {}
        self._seq = itertools.count()

    def _project(self, provider: Any) -> _Project | None:
        quota = quota_of(provider)
        if quota is None:
            return None
        project = self._projects.get(quota[0])
        if project is None:
            project = self._projects[quota[0]] = _Project(*quota)
        return project

    def admit(self, provider: Any, send: Any, expires: float | None, *, released: bool = False) -> bool:
        """On the loop: True when `send` may go now (a token taken, or no quota); else it is parked.
        `released`: the pacer gave it its token already (it still waits out a pause begun since)."""
        project = self._project(provider)
        if project is None:
            return True
        now = time.time()
        if released and (project.paused_until <= now or (expires is not None and expires <= now)):
            return True  # (an expired one is answered unsent by the sender)
        fresh = project.tokens > 0 and project.second == int(now) and project.paused_until <= now
        if fresh and not project.parked:  # a parked send nearer its expiry goes first
            project.tokens -= 1
            return True
        self._park(project, send, expires)
        return False

    def refused(self, provider: Any, send: Any, expires: float | None, retry_after: float | None) -> bool:
        """On the loop: a quota refusal of `send`. True: the project is paused and the send parked again;
        False: the provider has no quota here (the caller retries the push as before)."""
        project = self._project(provider)
        if project is None:
            return False
        now = time.time()
        until = now + retry_after if retry_after else (int(now) // 60 + 1) * 60  # else the minute's end
        if until > project.paused_until + 0.5:  # one pause for the sends refused together
            project.pauses += 1
            logger.warning("%s: the provider's quota is exhausted; its sends pause for %.1f s (pause %d)",
                           project.key, until - now, project.pauses)  # fmt: skip
        project.paused_until = max(project.paused_until, until)
        project.tokens = 0
        self._call(self.rates.pause, project.key, until)
        self._park(project, send, expires)
        return True

    def unpark_all(self) -> list[Any]:
        """Every parked send, nearest expiry first (the gateway is stopping: they are answered unsent)."""
        sends: list[Any] = []
        for project in self._projects.values():
            sends += [send for _, _, send in sorted(project.parked)]
            project.parked.clear()
        return sends

    def close(self) -> None:
        if self._executor is not None:
            self._executor.submit(_close_connection).result(timeout=5)
            self._executor.shutdown(wait=True)

    def _park(self, project: _Project, send: Any, expires: float | None) -> None:
        heapq.heappush(project.parked, (_NEVER if expires is None else expires, next(self._seq), send))
        if not project.refilling:
            project.refilling = True
            asyncio.get_running_loop().create_task(self._refill(project))

    def _call(self, method: Callable[..., Any], *args: Any) -> asyncio.Future[Any]:
        loop = asyncio.get_running_loop()
        if self._executor is None:
            future: asyncio.Future[Any] = loop.create_future()
            future.set_result(method(*args))
            return future
        return loop.run_in_executor(self._executor, method, *args)

    async def _refill(self, project: _Project) -> None:
        """Take shares for the parked sends of `project`, second after second, until none is parked."""
        try:
            while project.parked:
                now = time.time()
                expired = []  # past their expiry while parked: answered unsent, without a token
                while project.parked and project.parked[0][0] <= now:
                    expired.append(heapq.heappop(project.parked)[2])
                if expired:
                    self._release(expired)
                    continue
                if project.paused_until > now:
                    await asyncio.sleep(max(0.0, min(project.paused_until, project.first_expiry) - now))
                    continue
                second = int(now)
                if not (project.second == second and project.tokens > 0):
                    want = min(max(len(project.parked), self.chunk), 10 * self.chunk)
                    try:
                        granted, wait = await self._call(self.rates.take, project.key, project.per_minute,
                                                         want, now)  # fmt: skip
                    except Exception:  # the database is away: wait, do not send past the quota
                        logger.exception("%s: taking the quota failed", project.key)
                        granted, wait = 0, 1.0
                    if not granted:
                        await asyncio.sleep(max(0.0, min(wait, project.first_expiry - now)))
                        continue
                    if int(time.time()) != second:
                        continue  # that second is over: its share may not be spent in the next one
                    project.second, project.tokens = second, granted
                count = min(project.tokens, len(project.parked))
                project.tokens -= count
                self._release([heapq.heappop(project.parked)[2] for _ in range(count)])
                await asyncio.sleep(0)  # the workers take them before the next share
        finally:
            project.refilling = False
