"""Sending one round of pushes: every enabled device of each push's player, concurrently, each outcome
recorded (`PushSend`) before the gateway may ack, and a dead device disabled. The consumer loop is in
`trainings/push/gateway.py`; dead-lettering in `trainings/push/dead_letters.py`."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from reminders import metrics
from trainings.models import DeliveredPush, Device, PushSend, SendStatus
from trainings.push.providers import (
    AuthFailure,
    Providers,
    PushMessage,
    SendResult,
    Target,
    Verdict,
)
from trainings.transitions import devices_disable

logger = logging.getLogger("trainings.push.gateway")


class Outcome(StrEnum):
    DELIVERED = "delivered"  # every enabled device has its outcome recorded
    NO_DEVICE = "no_device"
    STALE = "stale"
    DUPLICATE = "duplicate"
    RETRY = "retry"
    DEAD_LETTERED = "dead_lettered"
    REJECTED = "rejected"


_ACKED = {Outcome.DELIVERED, Outcome.NO_DEVICE, Outcome.STALE, Outcome.DUPLICATE}


@dataclass(frozen=True)
class Handled:
    outcome: Outcome
    retry_after: float = 0.0  # RETRY: the provider's Retry-After (the floor of the backoff)
    error: str = ""
    push: PushMessage | None = None


_FINAL = {Verdict.ACCEPTED: SendStatus.ACCEPTED, Verdict.TOKEN_DEAD: SendStatus.TOKEN_DEAD,
          Verdict.FAILED: SendStatus.FAILED}  # fmt: skip


@dataclass(eq=False)
class Round:
    """One round's pushes from `PushSender.begin` to `PushSender.end`: what the database said before the
    sends, the sends' outcomes as they arrive (appended by the loop's thread), and when the last arrived."""

    seq: int
    now: Any
    handled: list[Handled | None]
    pushes: dict[int, PushMessage]
    closing: list[tuple[int, PushMessage, SendStatus]]
    attempt_of: dict[int, int]
    remaining: int  # sends without an answer yet (counted down on the loop's thread)
    arrived: collections.deque[_Result] = field(default_factory=collections.deque)
    results: list[_Result] = field(default_factory=list)
    finished: threading.Event = field(default_factory=threading.Event)


class PushSender:
    """Steps 1-4 for a list of message bodies, without the broker.

    The HTTP clients live on an event loop in a thread of their own; this (the caller's) thread does the
    database work, recording outcomes while later sends are still in flight (every FLUSH_SECONDS, one
    transaction for all that arrived), so a gateway killed in the middle of a batch re-sends at most the
    last moments'.

    A round is begun (`begin`: parse, ask the database what is done and which devices are enabled, hand
    the sends to the loop) and ended (`end`: record, write the push-level outcomes) separately, so the
    gateway begins the next round while this one's sends are in flight and ends this one while the next
    one's are: the sending thread never waits for the database. One pool of `in_flight` workers serves
    every round, oldest round first. A device found dead in one round is skipped by rounds that read the
    devices before its disabling was committed.
    """

    FLUSH_SECONDS = 0.05

    def __init__(self, providers: Providers, *, in_flight: int | None = None) -> None:
        self.providers = providers
        self.in_flight = in_flight or settings.TRAININGS_GATEWAY_IN_FLIGHT
        self.paused_until: dict[str, float] = {}  # written by the loop's thread (and by prepare failures)
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="push-sends", daemon=True)
        self._thread.start()
        self._queue: collections.deque[tuple[Round, int, PushMessage, Target]] = collections.deque()
        self._workers = 0  # the loop's thread only
        self._seq = 0  # rounds begun
        self._open: dict[int, Round] = {}  # rounds begun and not ended, by seq
        self._keys: set[str] = set()  # the idempotency keys of the open rounds
        # Devices a provider called dead: None until the disabling is committed, then the last round begun
        # before it (those rounds read the device as enabled and must skip it; later ones do not see it).
        self._dead: dict[int, int | None] = {}
        self._dead_lock = threading.Lock()
        self._recorded_at = 0.0

    def close(self) -> None:
        for provider in self.providers.all():
            with contextlib.suppress(Exception):
                asyncio.run_coroutine_threadsafe(provider.aclose(), self.loop).result(timeout=5)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=5)
        self.loop.close()

    def handle(
        self,
        bodies: Sequence[Any],
        *,
        attempts: Sequence[int] | None = None,
        meanwhile: Callable[[float], bool] | None = None,
    ) -> list[Handled]:
        """Steps 1-4 for `bodies`. `meanwhile(timeout)` is called while the sends are in flight (the
        gateway receives the next messages then); it returns False when it has nothing more to do."""
        return self.end(self.begin(bodies, attempts=attempts), meanwhile=meanwhile)

    def begin(self, bodies: Sequence[Any], *, attempts: Sequence[int] | None = None) -> Round:
        """Steps 1-2, and step 3 handed to the loop's thread: returns at once, the sends in flight."""
        now = timezone.now()
        handled: list[Handled | None] = [None] * len(bodies)
        pushes: dict[int, PushMessage] = {}
        for i, body in enumerate(bodies):
            try:
                pushes[i] = PushMessage.from_body(body)
            except ValueError as exc:
                logger.error("rejecting malformed push message: %s", exc)
                handled[i] = Handled(Outcome.REJECTED, error=str(exc))
        keys = {p.idempotency_key for p in pushes.values()}
        done = set(DeliveredPush.objects.filter(key__in=keys).values_list("key", flat=True))
        sent: dict[str, set[int | None]] = {}
        for key, device_id in PushSend.objects.filter(push_key__in=keys - done).values_list(
            "push_key", "device_id"
        ):
            sent.setdefault(key, set()).add(device_id)
        devices: dict[int, list[Target]] = {}
        players = {p.player for p in pushes.values() if p.idempotency_key not in done}
        enabled = Device.objects.enabled().filter(player_id__in=players).order_by("pk")
        for pk, player_id, service, platform, token, app_id in enabled.values_list(
            "pk", "player_id", "provider", "platform", "token", "app_id"
        ):  # tuples, not model instances: a round reads hundreds
            devices.setdefault(player_id, []).append(Target(pk, service, platform, token, app_id))

        work: list[tuple[int, PushMessage, Target]] = []
        closing: list[tuple[int, PushMessage, SendStatus]] = []  # push-level outcomes to record
        seen: set[str] = set(self._keys)  # an open round's push is that round's to finish
        for i, push in pushes.items():
            key = push.idempotency_key
            if key in done or key in seen:
                handled[i] = Handled(Outcome.DUPLICATE, push=push)
                continue
            seen.add(key)
            if push.expires_at is not None and push.expires_at <= now:
                closing.append((i, push, SendStatus.STALE))
                continue
            todo = [d for d in devices.get(push.player, []) if d.device_id not in sent.get(key, set())]
            if not todo:
                closing.append((i, push, SendStatus.NO_DEVICE if not sent.get(key) else SendStatus.ACCEPTED))
                continue
            work.extend((i, push, device) for device in todo)

        for provider in {id(p): p for p in (self.providers.for_device(d) for _, _, d in work)}.values():
            try:
                provider.prepare()
            except ConnectionError as exc:  # the token endpoint is down: that provider's sends wait
                self.paused_until[provider.name] = time.monotonic() + settings.TRAININGS_GATEWAY_RETRY_SECONDS
                logger.warning("provider %s not ready: %s", provider.name, exc)

        self._seq += 1
        attempt_of = {i: (attempts[i] if attempts else 1) for i in pushes}
        round_ = Round(self._seq, now, handled, pushes, closing, attempt_of, remaining=len(work))
        self._open[round_.seq] = round_
        self._keys |= {p.idempotency_key for i, p in pushes.items() if handled[i] is None}
        if work:
            self.loop.call_soon_threadsafe(self._enqueue, [(round_, i, p, d) for i, p, d in work])
        else:
            round_.finished.set()
        return round_

    def record_open(self) -> None:
        """Record what arrived for every open round, at most once per FLUSH_SECONDS."""
        if time.monotonic() - self._recorded_at >= self.FLUSH_SECONDS:
            for round_ in list(self._open.values()):
                self.record(round_)

    def record(self, round_: Round) -> None:
        """Record the outcomes of `round_` that arrived since the last call (one transaction)."""
        self._recorded_at = time.monotonic()
        fresh = [round_.arrived.popleft() for _ in range(len(round_.arrived))]
        if fresh:
            self._record_sends(fresh, round_.attempt_of, round_.now)
            round_.results.extend(fresh)

    def end(self, round_: Round, *, meanwhile: Callable[[float], bool] | None = None) -> list[Handled]:
        """Wait for the round's last answer, recording every FLUSH_SECONDS what arrived meanwhile (the
        other open rounds' too), then step 4: the push-level outcomes and a DeliveredPush per finished
        push. Raises AuthFailure once what did arrive is recorded."""
        try:
            done = round_.finished.is_set()
            while not done:
                deadline = time.monotonic() + self.FLUSH_SECONDS
                while meanwhile is not None and not round_.finished.is_set() and time.monotonic() < deadline:
                    if not meanwhile(0.005):
                        break
                done = round_.finished.wait(max(0.0, deadline - time.monotonic()))
                for other in list(self._open.values()):
                    self.record(other)
            self.record(round_)
            return self._conclude(round_)
        finally:
            self._open.pop(round_.seq, None)
            self._keys -= {p.idempotency_key for p in round_.pushes.values()}
            oldest = min(self._open, default=self._seq + 1)
            with self._dead_lock:  # a committed disabling no open round can have missed is forgotten
                for device_id, before in list(self._dead.items()):
                    if before is not None and before < oldest:
                        del self._dead[device_id]

    def _conclude(self, round_: Round) -> list[Handled]:
        results, pushes, handled, closing = round_.results, round_.pushes, round_.handled, round_.closing
        auth_error = next((r.error for (_, _, _, r) in results if r.verdict == Verdict.AUTH), None)
        retry: dict[int, SendResult] = {}
        for i, _, _, result in results:
            if result.verdict in (Verdict.RETRY, Verdict.AUTH):
                earlier = retry.get(i)
                if earlier is None or (result.retry_after or 0) > (earlier.retry_after or 0):
                    retry[i] = result
        closing_at = {c[0] for c in closing}
        complete = [
            (i, push)
            for i, push in pushes.items()
            if handled[i] is None and i not in retry and i not in closing_at
        ]
        self._finish(results, closing, complete, round_.attempt_of, round_.now)
        if auth_error is not None:
            raise AuthFailure(auth_error)

        for i, push, status in closing:
            outcome = {SendStatus.STALE: Outcome.STALE, SendStatus.NO_DEVICE: Outcome.NO_DEVICE}.get(
                status, Outcome.DELIVERED
            )
            handled[i] = Handled(outcome, push=push)
        for i, push in complete:
            handled[i] = Handled(Outcome.DELIVERED, push=push)
        for i, result in retry.items():
            handled[i] = Handled(Outcome.RETRY, retry_after=result.retry_after or 0.0, error=result.error,
                                 push=pushes[i])  # fmt: skip
        return [h if h is not None else Handled(Outcome.RETRY) for h in handled]

    def _enqueue(self, items: list[tuple[Round, int, PushMessage, Target]]) -> None:
        """On the loop's thread: queue a round's sends behind the earlier rounds' and start workers, at most
        `in_flight` (one coroutine per worker taking the next send, not a task per send on a semaphore)."""
        self._queue.extend(items)
        while self._workers < min(self.in_flight, len(self._queue)):
            self._workers += 1
            self.loop.create_task(self._worker())

    async def _worker(self) -> None:
        try:
            while self._queue:
                round_, i, push, device = self._queue.popleft()
                result = await self._send_one(round_, push, device)
                if result.verdict == Verdict.TOKEN_DEAD:
                    with self._dead_lock:
                        self._dead.setdefault(device.device_id, None)
                round_.arrived.append((i, push, device, result))
                round_.remaining -= 1
                if round_.remaining == 0:
                    round_.finished.set()
        finally:
            self._workers -= 1

    async def _send_one(self, round_: Round, push: PushMessage, device: Target) -> SendResult:
        with self._dead_lock:
            before = self._dead.get(device.device_id, -1)
        if before is None or round_.seq <= before:  # dead since this round read it enabled: not sent
            return SendResult(Verdict.TOKEN_DEAD, error="the device was disabled while this push waited")
        provider = self.providers.for_device(device)
        wait = self.paused_until.get(provider.name, 0.0) - time.monotonic()
        if wait > 0:  # throttled: this push waits its turn rather than adding to the provider's load
            return SendResult(Verdict.RETRY, error="provider paused (Retry-After)", retry_after=wait)
        try:
            result = await provider.send(push, device)
        except Exception as exc:  # a provider bug must not lose the batch's other outcomes
            logger.exception("provider %s failed on %s", provider.name, device.send_key(push))
            result = SendResult(Verdict.RETRY, error=f"{type(exc).__name__}")
        if result.verdict == Verdict.RETRY and result.retry_after:
            until = time.monotonic() + result.retry_after
            self.paused_until[provider.name] = max(self.paused_until.get(provider.name, 0.0), until)
        return result

    def _record_sends(self, results: list[_Result], attempt_of: dict[int, int], now: Any) -> None:
        """The final device outcomes among `results`, and the devices' state, in one transaction."""
        rows: list[PushSend] = []
        accepted: list[int] = []
        dead: dict[int, str] = {}
        for i, push, device, result in results:
            status = _FINAL.get(result.verdict)
            if status is None:
                continue
            rows.append(
                PushSend(
                    push_key=push.idempotency_key, device_id=device.device_id, player_id=push.player,
                    provider=self.providers.for_device(device).name, status=status,
                    provider_message_id=result.message_id[:300], error=result.error[:500],
                    attempts=attempt_of[i], recorded_at=now,
                )
            )  # fmt: skip
            if result.verdict == Verdict.ACCEPTED:
                accepted.append(device.device_id)
            elif result.verdict == Verdict.TOKEN_DEAD:
                dead[device.device_id] = result.error or "token refused by the provider"
        metrics.push_device_outcomes(
            (self.providers.for_device(device).name, str(result.verdict)) for _, _, device, result in results
        )
        if not rows:
            return
        with transaction.atomic():
            # Sorted, so two gateways recording overlapping rows take their locks in one order.
            PushSend.objects.bulk_create(sorted(rows, key=lambda r: (r.push_key, r.device_id or 0)),
                                         ignore_conflicts=True)  # fmt: skip
            if accepted:
                Device.objects.filter(pk__in=sorted(set(accepted))).update(last_success_at=timezone.now())
            by_reason: dict[str, list[int]] = {}
            for device_id, reason in sorted(dead.items()):
                by_reason.setdefault(reason, []).append(device_id)
            for reason, device_ids in sorted(by_reason.items()):  # one UPDATE per reason, not per device
                devices_disable(device_ids=device_ids, reason=reason)
        if dead:  # committed: rounds begun from now on read these devices as disabled
            with self._dead_lock:
                self._dead.update(dict.fromkeys(dead, self._seq))

    def _finish(
        self,
        results: list[_Result],
        closing: list[tuple[int, PushMessage, SendStatus]],
        complete: list[tuple[int, PushMessage]],
        attempt_of: dict[int, int],
        now: Any,
    ) -> None:
        """The push-level outcomes (stale, no device) and a DeliveredPush per finished push."""
        rows = [
            PushSend(push_key=push.idempotency_key, device=None, player_id=push.player, provider="",
                     status=status, attempts=attempt_of[i], recorded_at=now)
            for i, push, status in closing
            if status in (SendStatus.STALE, SendStatus.NO_DEVICE)
        ]  # fmt: skip
        finished = [p for _, p, _ in closing] + [p for _, p in complete]
        if not finished:
            return
        with transaction.atomic():
            PushSend.objects.bulk_create(sorted(rows, key=lambda r: r.push_key), ignore_conflicts=True)
            summary = _summaries(results, closing)
            DeliveredPush.objects.bulk_create(
                sorted(
                    (DeliveredPush(key=p.idempotency_key, provider=summary.get(p.idempotency_key) or "none")
                     for p in finished),
                    key=lambda d: d.key,
                ),
                ignore_conflicts=True,
            )  # fmt: skip


_Result = tuple[int, PushMessage, Target, SendResult]


def _summaries(results: list[_Result], closing: list[tuple[int, PushMessage, SendStatus]]) -> dict[str, str]:
    """Per finished push key, how it finished: `stale`, `no_device`, or the providers of its devices."""
    providers: dict[str, set[str]] = {}
    for _, push, device, _ in results:
        providers.setdefault(push.idempotency_key, set()).add(device.provider)
    summary = {key: "+".join(sorted(names))[:50] for key, names in providers.items()}
    for _, push, status in closing:
        if status in (SendStatus.STALE, SendStatus.NO_DEVICE):
            summary[push.idempotency_key] = str(status)
    return summary
