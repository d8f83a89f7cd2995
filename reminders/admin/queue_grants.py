"""Queue grants: which queues each scheduler API caller may publish `rabbitmq` callbacks to."""

from __future__ import annotations

from django.contrib import admin

from reminders.models import QueueGrant


@admin.register(QueueGrant)
class QueueGrantAdmin(admin.ModelAdmin):
    list_display = ["user", "pattern", "created_at"]
    list_select_related = ["user"]
    search_fields = ["user__username", "pattern"]
    raw_id_fields = ["user"]
    ordering = ["user__username", "pattern"]
