"""What happened to a push on the phone side, as a person reads it.

"Published to the push queue" is not "reached": a push reached a player only when a device (or later an
inbox) accepted it, which is what the gateway's `PushSend` rows say. These reads turn a push and its send
rows into one outcome: reached (n devices), accepted by a stand-in only ("logging stand-in, nothing sent":
no phone got it), no device, token dead, failed, still queued (and for how long), held for quiet hours
until …, skipped (why). One query for the send rows of any number of pushes,
on the (push_key, device) unique index.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from django.utils import timezone

from delivery.api import standin_names, standin_words
from delivery.models import PushSend, SendStatus
from trainings.models import Push, PushStatus, Training

# Outcome codes, for CSS classes and tests; the text is what people read.
REACHED, QUEUED, HELD, SKIPPED, WITHDRAWN, PENDING = (
    "reached",
    "queued",
    "held",
    "skipped",
    "withdrawn",
    "pending",
)
NO_DEVICE, TOKEN_DEAD, FAILED, STALE = "no_device", "token_dead", "failed", "stale"
STANDIN = "standin"  # accepted by a stand-in channel only (logging, webhook): nothing reached a phone


@dataclass(frozen=True)
class Outcome:
    code: str
    text: str
    at: datetime | None  # when it was decided (the latest send, the publication, the creation)
    sends: list[PushSend] = field(default_factory=list)

    @property
    def reached(self) -> bool:
        """Accepted, by a device or a stand-in (the stand-in's is shown as such, never as a phone)."""
        return self.code in (REACHED, STANDIN)


def push_sends(keys: Iterable[str]) -> dict[str, list[PushSend]]:
    """The gateway's send rows of these pushes, by push key (oldest first)."""
    found: dict[str, list[PushSend]] = {}
    for send in (
        PushSend.objects.filter(push_key__in=list(keys))
        .select_related("device")
        .order_by("recorded_at", "pk")
    ):
        found.setdefault(send.push_key, []).append(send)
    return found


def _age(delta: timedelta) -> str:
    seconds = max(int(delta.total_seconds()), 0)
    if seconds < 120:
        return f"{seconds} s"
    if seconds < 7200:
        return f"{seconds // 60} min"
    return f"{seconds // 3600} h {seconds % 3600 // 60} min"


def push_outcome(
    push: Push, sends: list[PushSend], *, zone: ZoneInfo | None = None, now: datetime | None = None
) -> Outcome:
    """One push's outcome from its own status and its send rows."""
    now = now or timezone.now()
    accepted = [s for s in sends if s.status == SendStatus.ACCEPTED]
    last = sends[-1].recorded_at if sends else None
    standins = standin_names()
    if accepted and all(s.provider in standins for s in accepted):
        names = sorted({s.provider for s in accepted})
        return Outcome(STANDIN, ", ".join(standin_words(name) for name in names), last, sends)
    if accepted:
        n = len(accepted)
        others = [s for s in sends if s.status != SendStatus.ACCEPTED]
        extra = f"; {len(others)} other device(s) not reached" if others else ""
        return Outcome(REACHED, f"reached ({n} device{'s' if n > 1 else ''} accepted{extra})", last, sends)
    if push.status == PushStatus.HELD:
        until = timezone.localtime(push.release_at, zone) if push.release_at else None
        shown = f"{until:%a %Y-%m-%d %H:%M} {until.tzname()}" if until else "the quiet hours end"
        return Outcome(HELD, f"held for quiet hours until {shown}", push.created_at, sends)
    if push.status == PushStatus.SKIPPED:
        return Outcome(
            SKIPPED, f"skipped: {push.status_reason or push.get_status_display()}", push.created_at
        )
    if push.status == PushStatus.WITHDRAWN:
        return Outcome(WITHDRAWN, "not sent: the player answered first", push.created_at)
    if push.status == PushStatus.PENDING:
        return Outcome(PENDING, "not published yet", push.created_at)
    statuses = {s.status for s in sends}
    if SendStatus.NO_DEVICE in statuses:
        return Outcome(NO_DEVICE, "no device: the player has no enabled device", last, sends)
    if SendStatus.STALE in statuses:
        return Outcome(STALE, "dropped: it waited in the queue past its use", last, sends)
    if statuses and statuses <= {SendStatus.TOKEN_DEAD}:
        return Outcome(TOKEN_DEAD, "token dead: the device was disabled", last, sends)
    if SendStatus.FAILED in statuses or SendStatus.TOKEN_DEAD in statuses:
        error = next((s.error for s in sends if s.error), "")
        return Outcome(FAILED, f"failed{': ' + error[:120] if error else ''}", last, sends)
    since = push.sent_at or push.created_at
    return Outcome(QUEUED, f"queued for {_age(now - since)}, no device answer yet", since, sends)


def push_outcomes(pushes: list[Push], *, zone: ZoneInfo | None = None) -> dict[str, Outcome]:
    """Outcomes of a page of pushes, by push key: one query for all their send rows."""
    sends = push_sends(p.key for p in pushes)
    now = timezone.now()
    return {p.key: push_outcome(p, sends.get(p.key, []), zone=zone, now=now) for p in pushes}


def timeline_reached(*, training: Training, occurrence_keys: list[str]) -> dict[str, list[str]]:
    """Names of the players each occurrence's pushes reached (a device accepted), on push_training_occ_idx
    and the send rows' (push_key, device) index; one only a stand-in accepted is named with it
    ("Ana (logging stand-in, nothing sent)")."""
    pushes = list(
        Push.objects.filter(training=training, occurrence_key__in=occurrence_keys)
        .order_by("player__name")
        .values_list("occurrence_key", "key", "player__name")
    )
    accepted: dict[str, set[str]] = {}
    for push_key, provider in PushSend.objects.filter(
        push_key__in=[key for _, key, _ in pushes], status=SendStatus.ACCEPTED
    ).values_list("push_key", "provider"):
        accepted.setdefault(push_key, set()).add(provider)
    standins = standin_names()
    reached: dict[str, list[str]] = {}
    for occurrence_key, key, name in pushes:
        if key in accepted:
            by = accepted[key]
            shown = name if by - standins else f"{name} ({', '.join(map(standin_words, sorted(by)))})"
            reached.setdefault(occurrence_key, []).append(shown)
    return reached
