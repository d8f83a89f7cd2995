"""What the gateway writes about its sends, and what a round reads of them before it sends: each device
outcome (`PushSend`, and the device's state) as it is answered, and per finished push its push-level
outcome (a `PushSend` row without a device). A `Round` is what the sender (delivery/gateway/sender.py) and the
`Recorder`, the thread that commits device outcomes while later sends are in flight, share about one round
of pushes."""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from common.lookups import array_literal
from common.prepared import prepared_run
from common.rows_insert import rows_insert_many
from delivery import queries
from delivery.devices import devices_disable
from delivery.domain import DOMAIN, PushOutcome
from delivery.family import members_of
from delivery.gateway import metrics
from delivery.gateway.liveness import push_minutes_add
from delivery.gateway.stamps import Stamps
from delivery.messages import AuthFailure, PushMessage, SendResult, Target, Verdict
from delivery.models import PUSH_FINISHED, PushSend, SendStatus

logger = logging.getLogger("delivery.gateway.consumer")

# One send's answer: (the push's index in its round, the push, the device, the result).
Answer = tuple[int, PushMessage, Target, SendResult]


class Outcome(StrEnum):
    DELIVERED = "delivered"  # every enabled device has its outcome recorded
    NO_DEVICE = "no_device"
    STALE = "stale"
    MUTED = "muted"  # the player muted the push's kind (and its offset is not critical)
    DUPLICATE = "duplicate"
    RETRY = "retry"
    DEAD_LETTERED = "dead_lettered"
    REJECTED = "rejected"


_ACKED = {Outcome.DELIVERED, Outcome.NO_DEVICE, Outcome.STALE, Outcome.MUTED, Outcome.DUPLICATE}
# The outcomes of a push as a whole (no device row): recorded once per push.
PUSH_LEVEL = (SendStatus.STALE, SendStatus.NO_DEVICE, SendStatus.MUTED)


@dataclass(frozen=True)
class Handled:
    outcome: Outcome
    retry_after: float = 0.0  # RETRY: the provider's Retry-After (the floor of the backoff)
    error: str = ""
    push: PushMessage | None = None
    sends: dict[int, int] = field(default_factory=dict)  # requests sent per device so far (this one's too)


@dataclass(eq=False)
class Round:
    """One round's pushes from `PushSender.begin` to `PushSender.end`: what the database said before the
    sends, the sends' outcomes as they arrive (appended by the loop's thread), and when the last arrived."""

    seq: int
    now: Any
    handled: list[Handled | None]
    pushes: dict[int, PushMessage]
    closing: list[tuple[int, PushMessage, SendStatus]]
    prior: dict[int, dict[int, int]]  # per push: requests sent per device in earlier rounds
    remaining: int  # sends without an answer yet (counted down on the loop's thread)
    work: int = 0  # sends handed to the loop
    fallback_waits: set[int] = field(default_factory=set)  # pushes a fallback waits for (push/routing.py)
    arrived: collections.deque[Answer] = field(default_factory=collections.deque)
    results: list[Answer] = field(default_factory=list)  # recorded
    sent: set[tuple[int, int]] = field(default_factory=set)  # (push, device) that did go out this round
    finished: threading.Event = field(default_factory=threading.Event)  # every send answered
    recorded: threading.Event = field(default_factory=threading.Event)  # ... and every outcome recorded

    def sends_of(self, i: int, device_id: int) -> int:
        """Requests sent to the device for push `i`, this round's included."""
        return self.prior.get(i, {}).get(device_id, 0) + ((i, device_id) in self.sent)


# A PushSend row as the gateway writes it (common/rows_insert.py: one statement for a round's rows).
_SEND_COLUMNS = ("push_key", "device_id", "player_id", "guardian_id", "coach_id", "provider", "status",
                 "provider_message_id", "error", "attempts", "recorded_at")  # fmt: skip
_FINAL = {Verdict.ACCEPTED: SendStatus.ACCEPTED, Verdict.TOKEN_DEAD: SendStatus.TOKEN_DEAD,
          Verdict.FAILED: SendStatus.FAILED}  # fmt: skip


def sends_record(
    answers: Sequence[tuple[Answer, int, Any]],
    *,
    channel_of: Callable[[Target], str],
    stamps: Stamps | None = None,
) -> dict[int, str]:
    """The final device outcomes among `answers` ((answer, requests sent to the device, recorded at)) and
    the dead devices' disabling, in one transaction. Returns the devices disabled as dead, with the reason.
    The accepting devices' `last_success_at` is not written in it: they go to `stamps`, which stamps them
    later (delivery/gateway/stamps.py); without one, right after the commit."""
    rows: list[tuple[Any, ...]] = []
    accepted: list[int] = []
    dead: dict[int, str] = {}
    for (_, push, device, result), attempts, recorded_at in answers:
        status = _FINAL.get(result.verdict)
        if status is None:
            continue
        rows.extend(  # a family's push: the outcome of each child's reminder it carried (delivery/family.py)
            (member.key, device.device_id, member.player, push.guardian, push.coach, channel_of(device),
             str(status), result.message_id[:300], result.error[:500], attempts, recorded_at)
            for member in members_of(push)
        )  # fmt: skip
        if result.verdict == Verdict.ACCEPTED:
            accepted.append(device.device_id)
        elif result.verdict == Verdict.TOKEN_DEAD:
            dead[device.device_id] = result.error or "token refused by the provider"
    metrics.push_device_outcomes((channel_of(answer[2]), str(answer[3].verdict)) for answer, _, _ in answers)
    if not rows:
        return {}
    with transaction.atomic():
        # Sorted, so two gateways recording overlapping rows take their locks in one order.
        sends = sorted(rows, key=lambda r: (r[0], r[1] or 0))
        rows_insert_many(PushSend, _SEND_COLUMNS, sends, prepared=True)  # tens of rows, commit after commit
        by_reason: dict[str, list[int]] = {}
        for device_id, reason in sorted(dead.items()):
            by_reason.setdefault(reason, []).append(device_id)
        for reason, device_ids in sorted(by_reason.items()):  # one UPDATE per reason, not per device
            devices_disable(device_ids=device_ids, reason=reason)
    if accepted:  # committed: a stamp claims only what is recorded
        into = stamps or Stamps()
        into.add(accepted, at=min(at for _, _, at in answers))
        if stamps is None:
            into.write()
    return dead


def sends_recorded(keys: set[str]) -> tuple[set[str], list[tuple[str, int | None, str]]]:
    """What a round reads before it sends: which of these push keys are done (a push-level row: no device,
    stale, muted, given up), and the outcomes recorded for the others (push key, device, status), from
    which the round sends only to the devices without one. One prepared statement on PostgreSQL
    (delivery/queries.py says why)."""
    if not keys:
        return set(), []
    rows: list[tuple[str, int | None, str]]
    if connection.vendor != "postgresql":
        rows = list(PushSend.objects.filter(push_key__in=keys).values_list("push_key", "device_id", "status"))
    else:
        rows = prepared_run(connection, queries.PUSH_SENDS_RECORDED, [_keys_literal(keys)])
    done = {key for key, device_id, status in rows if device_id is None and status in _FINISHED}
    return done, [row for row in rows if row[0] not in done]


_FINISHED = frozenset(str(status) for status in PUSH_FINISHED)


def _keys_literal(keys: set[str]) -> str:
    literal = array_literal(keys)
    if literal is None:  # a key it cannot write would match nothing, and its push be sent again
        raise TypeError("push keys must be text")
    return literal


def pushes_finish(
    answers: list[Answer],
    closing: list[tuple[int, PushMessage, SendStatus]],
    complete: list[tuple[int, PushMessage]],
    now: Any,
    *,
    standin_of: Callable[[Target], bool] = lambda device: False,
) -> None:
    """The push-level outcomes (stale, no device, muted: a row without a device, which also says the push
    is finished), the outcomes of the finished pushes published, and the round's device outcomes added to
    their minute (`answers`: every answer of the round, each recorded by `sends_record`). A push finished
    by its devices' outcomes needs no row more: those rows say it (`sends_recorded`).

    The minute is added once per round rather than with each commit of the recorder: every commit rewrote
    the same row, whose versions pile up on its page until it is pruned. A gateway killed mid-round leaves
    that round's sends out of the minutes (counts for the status page, not records). `standin_of` says
    whether a device's send went to a stand-in channel, whose acceptances the minute counts apart."""
    rows = [
        (member.key, None, member.player, push.guardian, push.coach, "", str(status), "", "", 0, now)
        for _, push, status in closing
        if status in PUSH_LEVEL
        for member in members_of(push)
    ]
    finished = [p for _, p, _ in closing] + [p for _, p in complete]
    verdicts = collections.Counter(_FINAL.get(result.verdict) for _, _, _, result in answers)
    accepted = verdicts[SendStatus.ACCEPTED]
    not_reached = verdicts[SendStatus.TOKEN_DEAD] + verdicts[SendStatus.FAILED]
    standin = sum(1 for _, _, device, r in answers if r.verdict == Verdict.ACCEPTED and standin_of(device))
    if not finished and not (accepted or not_reached):
        return
    with transaction.atomic():
        if rows:
            rows_insert_many(PushSend, _SEND_COLUMNS, sorted(rows, key=lambda r: r[0]))
        if finished:
            _outcomes_publish(closing, complete)
        if accepted or not_reached:
            # Last: concurrent gateways' rounds wait on the minute's row only for their commit.
            push_minutes_add(at=timezone.now(), accepted=accepted, not_reached=not_reached, standin=standin)


_PUSH_OUTCOME = {SendStatus.STALE: Outcome.STALE, SendStatus.NO_DEVICE: Outcome.NO_DEVICE,
                 SendStatus.MUTED: Outcome.MUTED}  # fmt: skip


def round_conclude(round_: Round, *, standin_of: Callable[[Target], bool]) -> list[Handled]:
    """Step 4 of a round whose every send is answered and recorded: the push-level outcomes
    (`pushes_finish`), and what the gateway does with each push. Raises AuthFailure once they are
    written."""
    results, pushes, handled, closing = round_.results, round_.pushes, round_.handled, round_.closing
    auth_error = next((r.error for (_, _, _, r) in results if r.verdict == Verdict.AUTH), None)
    retry: dict[int, SendResult] = {}
    for i, _, _, result in results:
        if result.verdict in (Verdict.RETRY, Verdict.AUTH):
            earlier = retry.get(i)
            if earlier is None or (result.retry_after or 0) > (earlier.retry_after or 0):
                retry[i] = result
    accepted = {i for i, _, _, r in results if r.verdict == Verdict.ACCEPTED}
    for i in round_.fallback_waits - accepted - set(retry):  # every send failed: the fallback next
        retry[i] = SendResult(Verdict.RETRY, error="no device accepted it: the fallback channel next",
                              retry_after=0.0)  # fmt: skip
    closing_at = {c[0] for c in closing}
    complete = [
        (i, push)
        for i, push in pushes.items()
        if handled[i] is None and i not in retry and i not in closing_at
    ]
    pushes_finish(results, closing, complete, round_.now, standin_of=standin_of)
    if auth_error is not None:
        raise AuthFailure(auth_error)

    sends: dict[int, dict[int, int]] = {i: dict(prior) for i, prior in round_.prior.items()}
    for i, device_id in round_.sent:
        sends.setdefault(i, {})[device_id] = round_.sends_of(i, device_id)

    for i, push, status in closing:
        outcome = _PUSH_OUTCOME.get(status, Outcome.DELIVERED)
        handled[i] = Handled(outcome, push=push, sends=sends.get(i, {}))
    for i, push in complete:
        handled[i] = Handled(Outcome.DELIVERED, push=push, sends=sends.get(i, {}))
    for i, result in retry.items():
        handled[i] = Handled(Outcome.RETRY, retry_after=result.retry_after or 0.0, error=result.error,
                             push=pushes[i], sends=sends.get(i, {}))  # fmt: skip
    return [h if h is not None else Handled(Outcome.RETRY) for h in handled]


def _outcomes_publish(
    closing: list[tuple[int, PushMessage, SendStatus]], complete: list[tuple[int, PushMessage]]
) -> None:
    """`push.outcome` for the players' pushes finished now, in their transaction, when anyone subscribes
    (the domain's, delivery/domain.py): reached (a device accepted it), token dead (every device's token was),
    failed, or no device. Read from every round's sends of these pushes: one statement for them all."""
    if not DOMAIN.outcomes_wanted():
        return
    done: list[tuple[PushMessage, str | None]] = [
        (p, None) for _, p, s in closing if s == SendStatus.NO_DEVICE
    ]
    done += [(p, "") for _, p in complete]
    done = [(p, tried) for p, tried in done if p.player is not None]  # a coach's digest has no player
    sends: dict[str, list[tuple[str, str]]] = {}
    rows = PushSend.objects.filter(push_key__in=[p.idempotency_key for p, tried in done if tried is not None],
                                   device__isnull=False).order_by("pk")  # fmt: skip
    for key, provider, status in rows.values_list("push_key", "provider", "status"):
        sends.setdefault(key, []).append((provider, status))
    outcomes = []
    for push, tried in done:
        channel, outcome = (
            (None, "no_device") if tried is None else _outcome(sends.get(push.idempotency_key, []))
        )
        for member in members_of(push):  # each child's reminder of a family's push
            assert member.player is not None
            outcomes.append(PushOutcome(push=member.key, player=member.player, guardian=push.guardian,
                                        training=member.training, kind=member.kind, channel=channel,
                                        outcome=outcome))  # fmt: skip
    DOMAIN.outcomes_publish(outcomes)


def _outcome(sends: list[tuple[str, str]]) -> tuple[str | None, str]:
    """(channel, outcome) of a push from its device sends, oldest first."""
    reached = [provider for provider, status in sends if status == SendStatus.ACCEPTED]
    if reached:
        return reached[0], "reached"
    last = sends[-1][0] if sends else None
    if sends and all(status == SendStatus.TOKEN_DEAD for _, status in sends):
        return last, "token_dead"
    return last, "failed"


class Recorder:
    """A thread that commits the answers of every open round as they arrive: one transaction for all that
    arrived since its last commit, at most once per `every` seconds, until `close()`.

    `record(batch)` commits; `committed(n)` is told how many answers it committed; `failed(exc)` is told
    when it could not (the database is gone) and stops."""

    def __init__(
        self,
        *,
        record: Callable[[list[tuple[Round, list[Answer]]]], None],
        committed: Callable[[int], object],
        failed: Callable[[BaseException], None],
        every: float,
    ) -> None:
        self._record, self._committed, self._failed, self.every = record, committed, failed, every
        self._arrivals: collections.deque[Round] = collections.deque()  # rounds with something arrived
        self._wake = threading.Condition()
        self._closing = False
        self._recorded_at = 0.0
        self._thread = threading.Thread(target=self._run, name="push-records", daemon=True)
        self._thread.start()

    def arrived(self, round_: Round) -> None:
        """An answer of `round_` is in its `arrived` queue (any thread)."""
        with self._wake:
            self._arrivals.append(round_)
            self._wake.notify()

    def close(self) -> None:
        """Commit what has arrived, then stop."""
        with self._wake:
            self._closing = True
            self._wake.notify()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        try:
            while True:
                with self._wake:
                    while not self._arrivals and not self._closing:
                        self._wake.wait()
                    if not self._arrivals:
                        return  # closing, nothing left
                wait = self._recorded_at + self.every - time.monotonic()
                if wait > 0:
                    time.sleep(wait)  # let a few more arrive: one commit for them all
                with self._wake:
                    rounds = list(dict.fromkeys(self._arrivals))  # each once, oldest first
                    self._arrivals.clear()
                self._recorded_at = time.monotonic()
                batch = [(r, [r.arrived.popleft() for _ in range(len(r.arrived))]) for r in rounds]
                self._record([(r, answers) for r, answers in batch if answers])
                for round_, answers in batch:
                    round_.results.extend(answers)
                    if len(round_.results) == round_.work:  # every send answered and recorded
                        round_.recorded.set()
                count = sum(len(answers) for _, answers in batch)
                if count:
                    self._committed(count)
        except BaseException as exc:
            logger.exception("recording push outcomes failed")
            self._failed(exc)
        finally:
            connection.close()  # this thread's own
