"""The Device admin: each device with its state (enabled, last success, when and why it was disabled) and
its latest sends. Read-only (the app registers devices); coaches see their teams' players' devices and
those of the players' guardians.

Registered from trainings/admin/trainings.py (one import line), kept here so the push code stays in one place.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import Q, QuerySet
from django.http import HttpRequest
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from delivery.api import token_preview
from delivery.models import Device
from trainings.models import CoachPush, Push
from trainings.selectors import guardians_visible_to, players_visible_to


class DeviceStateFilter(admin.SimpleListFilter):
    title = _("state")
    parameter_name = "state"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("enabled", gettext("Enabled")), ("disabled", gettext("Disabled"))]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Device]) -> QuerySet[Device]:
        if self.value() == "enabled":
            return queryset.filter(disabled_at__isnull=True)
        if self.value() == "disabled":
            return queryset.filter(disabled_at__isnull=False)
        return queryset


@admin.register(Device)
class DeviceAdmin(admin.ModelAdmin):
    list_display = ["owner", "provider", "platform", "short_token", "state", "last_success_at", "created_at"]
    list_filter = [DeviceStateFilter, "provider", "platform"]
    search_fields = ["player__name", "guardian__name", "token"]
    list_select_related = ["player", "guardian"]
    fields = ("player", "guardian", "provider", "platform", "short_token", "app_id", "state", "created_at",
              "last_success_at", "disabled_at", "disabled_reason", "recent_sends")  # fmt: skip
    readonly_fields = fields

    def get_queryset(self, request: HttpRequest) -> QuerySet[Device]:
        user = request.user
        visible = Q(player__in=players_visible_to(user)) | Q(guardian__in=guardians_visible_to(user))
        return super().get_queryset(request).filter(visible)

    @admin.display(description=_("owner"))
    def owner(self, device: Device) -> str:
        """The player, or the guardian (and for whom) the device reaches."""
        if device.guardian is not None:
            return gettext("{name} (guardian)").format(name=device.guardian.name)
        return device.player.name if device.player else ""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    @admin.display(description=_("token"))
    def short_token(self, device: Device) -> str:
        return token_preview(device.token)

    @admin.display(description=_("state"))
    def state(self, device: Device) -> SafeString:
        if device.enabled:
            return format_html('<span style="color:#080">{}</span>', "enabled")
        return format_html(
            '<span style="color:#a00">disabled {}</span>: {}',
            device.disabled_at.strftime("%Y-%m-%d %H:%M UTC") if device.disabled_at else "",
            device.disabled_reason,
        )

    @admin.display(description=_("latest sends"))
    def recent_sends(self, device: Device) -> SafeString:
        """Each send named by what it said ("Speed session: Pre-training questionnaire"), not by its push's
        idempotency key, which is the engine's word (operators find it under Push sends)."""
        sends = list(device.sends.order_by("-recorded_at")[:10])
        keys = [s.push_key for s in sends]
        said = {
            **dict(CoachPush.objects.filter(key__in=keys).values_list("key", "title")),
            **{key: f"{training}: {title}" for key, training, title in
               Push.objects.filter(key__in=keys).values_list("key", "training__title", "title")},
        }  # fmt: skip
        rows = format_html_join(
            "",
            "<li>{} {} {} {}</li>",
            ((s.recorded_at.strftime("%Y-%m-%d %H:%M"), said.get(s.push_key, "a push"), s.status, s.error)
             for s in sends),
        )  # fmt: skip
        return format_html("<ul>{}</ul>", rows) if sends else format_html("{}", "none yet")
