"""Audit history: who changed a job, schedule, throttle policy, rule or training, and what.

django-simple-history keeps one row per save of each audited model in its "historical" table, with the
user of the request that made it (HistoryRequestMiddleware; DRF sets the token's user on the same request)
and a diff the admin's History page shows. Two things keep it off the hot paths:

- `AuditedHistory` skips saves that touch only bookkeeping fields (a schedule's `next_fire_at` moved by
  every fire, a throttle bucket's tokens): those are the engine at work, not a person's change. The
  bookkeeping fields are not copied into history at all, nor `updated_at` (the history row has its date).
- Occurrences have no history, and queryset `.update()`/`bulk_create` never send the signals it hooks.

Rows older than REMINDERS_HISTORY_RETENTION_DAYS are purged by the hourly purge task (`history_purge_old`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.apps import apps
from django.conf import settings
from django.db.models import Model
from django.utils import timezone
from simple_history.manager import HistoryDescriptor
from simple_history.models import HistoricalChanges, HistoricalRecords
from simple_history.signals import post_create_historical_record, pre_create_historical_record

from common.rows_insert import mark_saved

logger = logging.getLogger(__name__)


class AuditedHistory(HistoricalRecords):
    """HistoricalRecords without the bookkeeping: `bookkeeping` fields (and `updated_at`) are not copied,
    and a save whose `update_fields` are all bookkeeping records nothing. `private` fields (a secret) are
    not copied either, so the history table holds no more secrets than the admin shows."""

    def __init__(self, *, bookkeeping: Iterable[str] = (), private: Iterable[str] = (), **kwargs: Any):
        self.bookkeeping = frozenset({*bookkeeping, "updated_at"})
        super().__init__(excluded_fields=sorted(self.bookkeeping | set(private)), **kwargs)

    def post_save(self, instance: Model, created: bool, using: str | None = None, **kwargs: Any) -> None:
        fields = kwargs.get("update_fields")
        if not created and fields is not None and set(fields) <= self.bookkeeping:
            return
        super().post_save(instance, created, using=using, **kwargs)

    def finalize(self, sender: type[Model], **kwargs: Any) -> None:
        super().finalize(sender, **kwargs)
        descriptor = sender.__dict__.get(self.manager_name)
        if type(descriptor) is HistoryDescriptor:
            setattr(sender, self.manager_name, _HistoryDescriptor(descriptor))
            _AUDITED[sender] = self

    def creation_record(self, instance: Model, using: str | None = None) -> _Creation | None:
        """What `post_save` records for a newly created `instance`, unsaved, for a caller that writes the
        row and its history in one statement; None when no history is kept for it. The same values and
        `pre_create_historical_record` signal as simple-history's `create_historical_record`; the caller
        calls `sent()` once the row is written (its `post_create_historical_record`)."""
        if not getattr(settings, "SIMPLE_HISTORY_ENABLED", True):
            return None
        if hasattr(instance, "skip_history_when_saving"):
            return None
        if self.m2m_models:
            raise TypeError("a model with m2m history is saved with save(): its m2m rows follow the record")
        using = using if self.use_base_model_db else None
        history_model = getattr(type(instance), self.manager_name).model
        context = {
            "history_date": getattr(instance, "_history_date", timezone.now()),
            "history_user": self.get_history_user(instance),
            "history_change_reason": self.get_change_reason_for_object(instance, "+", using),
        }
        attrs = {field.attname: getattr(instance, field.attname) for field in self.fields_included(instance)}
        if getattr(history_model, "history_relation", None) is not None:
            attrs["history_relation"] = instance
        record = history_model(history_type="+", **context, **attrs)
        pre_create_historical_record.send(
            sender=history_model, instance=instance, history_instance=record, using=using, **context
        )
        return _Creation(history_model, instance, record, using, context)


_AUDITED: dict[type[Model], AuditedHistory] = {}


def audited_history(model: type[Model]) -> AuditedHistory | None:
    """The AuditedHistory that records `model`'s changes, if any."""
    return _AUDITED.get(model)


@dataclass
class _Creation:
    """A creation's history row, built and announced, waiting for the statement that writes it."""

    model: type[Model]
    instance: Model
    record: Model
    using: str | None
    context: dict[str, Any]

    def sent(self) -> None:
        """The row is written: mark it saved and send `post_create_historical_record`."""
        mark_saved([self.record], self.using)
        post_create_historical_record.send(
            sender=self.model,
            instance=self.instance,
            history_instance=self.record,
            using=self.using,
            **self.context,
        )


class _HistoryDescriptor(HistoryDescriptor):
    """simple-history's descriptor, with its manager class built once: the stock one calls
    `from_queryset` (a new class, found through `inspect.getmembers`) on every `instance.history`, and every
    audited save reads it once; on a training's creation that was a fifth of the CPU."""

    def __init__(self, stock: HistoryDescriptor) -> None:
        super().__init__(stock.model, manager=stock.manager_class, queryset=stock.queryset_class)
        self._manager = stock.manager_class.from_queryset(stock.queryset_class)

    def __get__(self, instance: Model | None, owner: type[Model]) -> Any:
        return self._manager(self.model, instance)


def without_history(instance: Model) -> Model:
    """Mark `instance` so its next saves record nothing: a row the system derives from another audited
    change (a training's jobs follow the training, whose history names who changed it)."""
    instance.skip_history_when_saving = True  # type: ignore[attr-defined]  # simple-history's own flag
    return instance


def history_models() -> list[type[Model]]:
    return [model for model in apps.get_models() if issubclass(model, HistoricalChanges)]


def history_purge_old(*, now: datetime | None = None, max_batches: int = 100) -> dict[str, int]:
    """Delete history rows older than REMINDERS_HISTORY_RETENTION_DAYS, in short batches found through
    the `history_date` index; returns how many went per historical model."""
    cutoff = (now or timezone.now()) - timedelta(days=settings.REMINDERS_HISTORY_RETENTION_DAYS)
    batch = settings.REMINDERS_PURGE_BATCH
    deleted: dict[str, int] = {}
    for model in history_models():
        old = model._default_manager.filter(history_date__lt=cutoff)
        count = 0
        for _ in range(max_batches):
            ids = list(old.values_list("pk", flat=True)[:batch])
            if not ids:
                break
            count += model._default_manager.filter(pk__in=ids).delete()[0]
        if count:
            deleted[model._meta.label] = count
    if deleted:
        logger.info("purged audit history: %s", deleted)
    return deleted
