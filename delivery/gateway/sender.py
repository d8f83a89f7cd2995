"""Sending one round of pushes: every enabled device of each push's player, concurrently, each outcome
recorded (`PushSend`) before the gateway may ack, and a dead device disabled. The consumer loop is in
`delivery/gateway/consumer.py`; dead-lettering in `delivery/gateway/dead_letters.py`.

What a crash can send twice: a (push, device) whose send went out but whose outcome was not committed. A
recorder thread commits the outcomes as they are answered (one transaction for all that arrived since its
last commit), and no send starts while `in_flight` sends are unanswered or answered but not committed, so
a kill -9 re-sends at most TRAININGS_GATEWAY_IN_FLIGHT (push, device) pairs.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from django.conf import settings
from django.db import connection
from django.utils import timezone

from delivery.channels.providers import AuthFailure, Providers, PushMessage, SendResult, Target, Verdict
from delivery.channels.registry import standin_names
from delivery.devices import devices_disable
from delivery.domain import DOMAIN
from delivery.gateway.quota import Pacer
from delivery.gateway.records import (
    Answer,
    Handled,
    Outcome,
    Recorder,
    Round,
    round_conclude,
    sends_record,
    sends_recorded,
)
from delivery.gateway.routing import addresses_of, channels_for, route
from delivery.gateway.stamps import Stamps
from delivery.models import SendStatus

__all__ = ["AuthFailure", "Handled", "Outcome", "PushSender", "Round", "devices_disable"]

logger = logging.getLogger("delivery.gateway.consumer")

# The stand-in channels (their acceptances are counted apart on the status page: no phone got them).
STANDINS = standin_names()


class PushSender:
    """Steps 1-4 for a list of message bodies, without the broker.

    The HTTP clients live on an event loop in a thread of their own; the device outcomes are committed as
    they arrive by the recorder thread (or, in a test's transaction, by the caller's thread every
    FLUSH_SECONDS); the caller's thread does the rest of the database work.

    A round is begun (`begin`: parse, ask the database what is done and which devices are enabled, hand
    the sends to the loop) and ended (`end`: record, write the push-level outcomes) separately, so the
    gateway begins the next round while this one's sends are in flight and ends this one while the next
    one's are: the sending thread never waits for the database. One pool of `in_flight` workers serves
    every round, oldest round first. A device found dead in one round is skipped by rounds that read the
    devices before its disabling was committed.
    """

    FLUSH_SECONDS = 0.05  # recording on the caller's thread: at most this often
    RECORD_SECONDS = 0.005  # the recorder thread: at most one commit this often (more arrive per commit)

    def __init__(
        self, providers: Providers, *, in_flight: int | None = None, record_in_thread: bool | None = None
    ) -> None:
        self.providers = providers
        self.in_flight = in_flight or settings.TRAININGS_GATEWAY_IN_FLIGHT
        # Written by the loop's thread (and by prepare failures): a channel's pause, or one address's
        # ("<channel>/<device id>") when the service throttles per address.
        self.paused_until: dict[str, float] = {}
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="push-sends", daemon=True)
        self._thread.start()
        self._queue: collections.deque[tuple[Round, int, PushMessage, Target]] = collections.deque()
        self._ready: collections.deque[tuple[Round, int, PushMessage, Target]] = collections.deque()  # paced
        self._pacer = Pacer(self._released, chunk=self.in_flight)  # provider quotas (gateway/quota.py)
        self._workers = 0  # the loop's thread only
        self._unrecorded = 0  # sends started and not yet committed (the loop's thread only)
        # Workers waiting for `_unrecorded` to drop under `in_flight`: a commit wakes as many as it made
        # room for (an Event would wake every waiting worker on every commit, to send one each).
        self._waiting: collections.deque[asyncio.Future[None]] = collections.deque()
        self._seq = 0  # rounds begun
        self._open: dict[int, Round] = {}  # rounds begun and not ended, by seq
        self._keys: set[str] = set()  # the idempotency keys of the open rounds
        # Devices a provider called dead: None until the disabling is committed, then the last round begun
        # before it (those rounds read the device as enabled and must skip it; later ones do not see it).
        self._dead: dict[int, int | None] = {}
        self._dead_lock = threading.Lock()
        self._recorded_at = 0.0
        self.stamps = Stamps()  # the accepting devices' `last_success_at`, written once a minute
        # A test's transaction is its thread's alone: another thread could not see its rows.
        if record_in_thread is None:
            record_in_thread = not connection.in_atomic_block
        self._recorder_error: BaseException | None = None
        self._recorder: Recorder | None = None
        if record_in_thread:
            self._recorder = Recorder(
                record=self._record_sends,
                committed=lambda count: self.loop.call_soon_threadsafe(self._committed, count),
                failed=self._recorder_failed,
                every=self.RECORD_SECONDS,
            )

    def close(self) -> None:
        """Close the providers' connections and the loop's last tasks (cancelled and awaited, so nothing is
        destroyed pending), the recorder, then the loop. Call it once every round has ended."""

        async def shutdown() -> None:
            for provider in self.providers.all():
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(provider.aclose(), 5)
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await self.loop.shutdown_asyncgens()

        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(shutdown(), self.loop).result(timeout=10)
        if self._recorder is not None:  # before the loop stops: its last commit tells the loop
            self._recorder.close()
        with contextlib.suppress(Exception):  # lost with the database: the next acceptances stamp them
            self.stamps.write()
        self._pacer.close()
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=5)
        if not self._thread.is_alive():
            self.loop.close()

    def handle(
        self,
        bodies: Sequence[Any],
        *,
        sends: Sequence[dict[int, int]] | None = None,
        meanwhile: Callable[[float], bool] | None = None,
    ) -> list[Handled]:
        """Steps 1-4 for `bodies`. `meanwhile(timeout)` is called while the sends are in flight (the
        gateway receives the next messages then); it returns False when it has nothing more to do."""
        return self.end(self.begin(bodies, sends=sends), meanwhile=meanwhile)

    def begin(self, bodies: Sequence[Any], *, sends: Sequence[dict[int, int]] | None = None) -> Round:
        """Steps 1-2, and step 3 handed to the loop's thread: returns at once, the sends in flight.

        `sends[i]`: the requests already sent per device for `bodies[i]` (the gateway's earlier rounds)."""
        # Numbered before the devices are read: a disabling committed from now on names this round or a
        # later one, so this round skips a device it read as enabled (`_send_one`).
        self._seq += 1
        seq = self._seq
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
        done, recorded = sends_recorded(keys)
        sent: dict[str, dict[int | None, str]] = {}
        for key, device_id, status in recorded:
            sent.setdefault(key, {})[device_id] = status
        devices = addresses_of([p for p in pushes.values() if p.idempotency_key not in done])
        preferences = DOMAIN.preferences({(*p.recipient, p.kind) for p in pushes.values()})
        critical = DOMAIN.rules_critical({p.rule for p in pushes.values() if p.rule}) if any(
            muted for _, muted in preferences.values()) else {}  # fmt: skip
        fallback_waits: set[int] = set()  # pushes with a fallback address if this round's sends all fail
        work: list[tuple[int, PushMessage, Target]] = []
        closing: list[tuple[int, PushMessage, SendStatus]] = []  # push-level outcomes to record
        seen: set[str] = set(self._keys)  # an open round's push is that round's to finish
        for i, push in pushes.items():
            key = push.idempotency_key
            if key in done or key in seen:
                handled[i] = Handled(Outcome.DUPLICATE, push=push)
                continue
            seen.add(key)
            channels, muted = preferences.get((*push.recipient, push.kind), ("default", False))
            todo, spare = route(devices.get(push.recipient, []), done=sent.get(key, {}),
                                channels=channels_for(push, channels))  # fmt: skip
            if not todo and sent.get(key) and not (sends and sends[i]):
                # Every address has its outcome from an earlier delivery of the push: it was finished.
                handled[i] = Handled(Outcome.DUPLICATE, push=push)
                continue
            if push.expires_at is not None and push.expires_at <= now:
                closing.append((i, push, SendStatus.STALE))
                continue
            if muted and not DOMAIN.critical_at(
                critical.get(push.rule or ""), push.offset
            ):  # recorded, not dropped
                closing.append((i, push, SendStatus.MUTED))
                continue
            if spare:
                fallback_waits.add(i)
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

        prior = {i: dict(sends[i]) for i in pushes if sends and sends[i]}
        round_ = Round(seq, now, handled, pushes, closing, prior, remaining=len(work), work=len(work),
                       fallback_waits=fallback_waits)  # fmt: skip
        self._open[round_.seq] = round_
        self._keys |= {p.idempotency_key for i, p in pushes.items() if handled[i] is None}
        if work:
            self.loop.call_soon_threadsafe(self._enqueue, [(round_, i, p, d) for i, p, d in work])
        else:
            round_.finished.set()
            round_.recorded.set()
        return round_

    def record_open(self) -> None:
        """Record what arrived for every open round, at most once per FLUSH_SECONDS (without the recorder
        thread)."""
        if self._recorder is None and time.monotonic() - self._recorded_at >= self.FLUSH_SECONDS:
            for round_ in list(self._open.values()):
                self.record(round_)

    def record(self, round_: Round) -> None:
        """Record the outcomes of `round_` that arrived since the last call (one transaction)."""
        if self._recorder is not None:
            return  # the recorder thread's
        self._recorded_at = time.monotonic()
        fresh = [round_.arrived.popleft() for _ in range(len(round_.arrived))]
        if fresh:
            self._record_sends([(round_, fresh)])
            round_.results.extend(fresh)
        if round_.finished.is_set() and not round_.arrived:
            round_.recorded.set()

    def end(self, round_: Round, *, meanwhile: Callable[[float], bool] | None = None) -> list[Handled]:
        """Wait for the round's last answer, recording every FLUSH_SECONDS what arrived meanwhile (the
        other open rounds' too), then step 4: the push-level outcomes of the finished pushes. Raises
        AuthFailure once what did arrive is recorded."""
        # The recorder thread says when the round is recorded; without it, this thread records once the
        # round is answered.
        event = round_.recorded if self._recorder is not None else round_.finished
        try:
            while not round_.recorded.is_set():
                deadline = time.monotonic() + self.FLUSH_SECONDS
                while meanwhile is not None and not event.is_set() and time.monotonic() < deadline:
                    if not meanwhile(0.005):
                        break
                event.wait(max(0.0, deadline - time.monotonic()))
                for other in list(self._open.values()):
                    self.record(other)
            if self._recorder_error is not None:
                raise self._recorder_error
            return round_conclude(
                round_, standin_of=lambda device: self.providers.for_device(device).name in STANDINS
            )
        finally:
            self._open.pop(round_.seq, None)
            self._keys -= {p.idempotency_key for p in round_.pushes.values()}
            oldest = min(self._open, default=self._seq + 1)
            with self._dead_lock:  # a committed disabling no open round can have missed is forgotten
                for device_id, before in list(self._dead.items()):
                    if before is not None and before < oldest:
                        del self._dead[device_id]

    def end_unsent(self, rounds: Sequence[Round]) -> None:
        """End `rounds` once the broker connection is lost (their messages are another gateway's): the sends
        in flight are answered, the others answered as retries unsent, as under a pause (`_send_one`)."""
        before = {p.name: self.paused_until.get(p.name, 0.0) for p in self.providers.all()}
        self.paused_until.update(dict.fromkeys(before, time.monotonic() + 3600))
        self.loop.call_soon_threadsafe(lambda: self._released(self._pacer.unpark_all()))  # answered unsent
        for round_ in rounds:
            self.end(round_)
        self.paused_until.update(before)

    def _enqueue(self, items: list[tuple[Round, int, PushMessage, Target]]) -> None:
        """On the loop's thread: queue a round's sends behind the earlier rounds' and start workers, at most
        `in_flight` (one coroutine per worker taking the next send, not a task per send on a semaphore)."""
        self._queue.extend(items)
        while self._workers < min(self.in_flight, len(self._queue) + len(self._ready)):
            self._workers += 1
            self.loop.create_task(self._worker())

    async def _worker(self) -> None:
        try:
            while self._queue or self._ready:
                if self._recorder is not None and self._unrecorded >= self.in_flight:
                    # As many sends as a crash may repeat are out without a committed outcome.
                    waiter = self.loop.create_future()
                    self._waiting.append(waiter)
                    await waiter
                    continue
                paced = bool(self._ready)  # released by the pacer, with their token
                item = self._ready.popleft() if paced else self._queue.popleft()
                round_, i, push, device = item
                expires = push.expires_at.timestamp() if push.expires_at else None
                if not self._pacer.admit(self.providers.for_device(device), item, expires, released=paced):
                    continue  # parked until its provider's quota has room (a token of its own then)
                self._unrecorded += 1
                result = await self._send_one(round_, i, push, device)
                if result is None:  # refused for the project's quota: parked again, sent after the pause
                    self._unrecorded -= 1
                    continue
                if result.verdict == Verdict.TOKEN_DEAD:
                    with self._dead_lock:
                        self._dead.setdefault(device.device_id, None)
                round_.arrived.append((i, push, device, result))
                round_.remaining -= 1
                if round_.remaining == 0:
                    round_.finished.set()
                if self._recorder is None:
                    self._unrecorded -= 1
                else:
                    self._recorder.arrived(round_)
        finally:
            self._workers -= 1

    def _committed(self, count: int) -> None:
        """On the loop's thread: `count` outcomes are committed; waiting workers may send again."""
        self._unrecorded -= count
        room = self.in_flight - self._unrecorded
        while room > 0 and self._waiting:
            waiter = self._waiting.popleft()
            if not waiter.done():  # (cancelled at close)
                waiter.set_result(None)
                room -= 1
        if (self._queue or self._ready) and self._workers < min(
            self.in_flight, len(self._queue) + len(self._ready)
        ):
            self._enqueue([])

    def _released(self, sends: list[tuple[Round, int, PushMessage, Target]]) -> None:
        """On the loop's thread: parked sends the pacer gave a token, sent before the rest."""
        self._ready.extend(sends)
        self._enqueue([])

    async def _send_one(self, round_: Round, i: int, push: PushMessage, device: Target) -> SendResult | None:
        with self._dead_lock:
            before = self._dead.get(device.device_id, -1)
        if before is None or round_.seq <= before:  # dead since this round read it enabled: not sent
            return SendResult(Verdict.TOKEN_DEAD, error="the device was disabled while this push waited")
        provider = self.providers.for_device(device)
        address = f"{provider.name}/{device.device_id}"
        now = time.monotonic()
        wait = max(self.paused_until.get(provider.name, 0.0), self.paused_until.get(address, 0.0)) - now
        if wait > 0:  # throttled: this push waits its turn rather than adding to the service's load
            return SendResult(Verdict.RETRY, error="paused by the service's Retry-After", retry_after=wait)
        if push.expires_at is not None and push.expires_at.timestamp() <= time.time():  # waited past it
            return SendResult(Verdict.RETRY, error="expired before it could be sent", retry_after=0.0)
        round_.sent.add((i, device.device_id))
        try:
            result = await provider.send(push, device)
        except Exception as exc:  # a provider bug must not lose the batch's other outcomes
            logger.exception("provider %s failed on %s", provider.name, device.send_key(push))
            result = SendResult(Verdict.RETRY, error=f"{type(exc).__name__}")
        if result.quota and self._pacer.refused(provider, (round_, i, push, device),
                                                push.expires_at.timestamp() if push.expires_at else None,
                                                result.retry_after):  # fmt: skip
            return None
        if result.verdict == Verdict.RETRY and result.retry_after:
            key = address if result.per_address else provider.name
            self.paused_until[key] = max(
                self.paused_until.get(key, 0.0), time.monotonic() + result.retry_after
            )
            if len(self.paused_until) > 10_000:  # forget the addresses whose pause is over
                for name, until in list(self.paused_until.items()):
                    if until < now:
                        del self.paused_until[name]
        return result

    def _record_sends(self, batch: list[tuple[Round, list[Answer]]]) -> None:
        """Commit the rounds' answers (recorded at the commit's time); a device found dead is then skipped by
        the rounds that read it."""
        now = timezone.now()
        dead = sends_record(
            [(answer, round_.sends_of(answer[0], answer[2].device_id), now)
             for round_, answers in batch for answer in answers],
            channel_of=lambda device: self.providers.for_device(device).name, stamps=self.stamps,
        )  # fmt: skip
        if dead:  # committed: rounds begun from now on read these devices as disabled
            with self._dead_lock:
                self._dead.update(dict.fromkeys(dead, self._seq))

    def _recorder_failed(self, exc: BaseException) -> None:
        """The recorder thread could not commit (the database is gone): the gateway must stop, not ack."""
        self._recorder_error = exc
        for round_ in list(self._open.values()):
            round_.recorded.set()
