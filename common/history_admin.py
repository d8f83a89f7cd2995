"""The admin's History page for audited models, read-only and scoped like the change page.

simple-history's admin lists who changed what and when (with the changed fields), but two of its defaults do
not fit here: its version page saves a POSTed form (a revert that would bypass the services that
reschedule), and for an object outside the admin's queryset it falls back to the last recorded state, so a
coach could read another team's training history. `AuditedAdmin` refuses both, and names the author
without a link for a viewer who may not open the user admin.
"""

from __future__ import annotations

from typing import Any

from django.contrib.admin.utils import unquote
from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied, ValidationError
from django.db.models import Model
from django.http import Http404, HttpRequest, HttpResponse
from simple_history.admin import SimpleHistoryAdmin


def _may_open_users(request: HttpRequest) -> bool:
    """Whether the "Changed by" column may link to the user admin (simple-history links it for everyone)."""
    user_model = get_user_model()._meta
    return any(
        request.user.has_perm(f"{user_model.app_label}.{action}_{user_model.model_name}")
        for action in ("view", "change")
    )


class AuditedAdmin(SimpleHistoryAdmin):
    def history_view(self, request: HttpRequest, object_id: str, extra_context: Any = None) -> HttpResponse:
        self._require_history_visible(request, object_id)
        if not _may_open_users(request):  # a coach: the author's name as text, not a link to a 403
            extra_context = {**(extra_context or {}), "admin_user_view": ""}
        return super().history_view(request, object_id, extra_context)

    def history_form_view(
        self, request: HttpRequest, object_id: str, version_id: str, extra_context: Any = None
    ) -> HttpResponse:
        if request.method not in ("GET", "HEAD"):
            raise PermissionDenied("history is read-only")
        self._require_history_visible(request, object_id)
        return super().history_form_view(request, object_id, version_id, extra_context)

    def history_visible_when_deleted(self, request: HttpRequest, last_state: Model) -> bool:
        """Whether this user may read a deleted object's history, judged on its last recorded state.
        Admins whose queryset is scoped (a coach's trainings) override this with the same scope."""
        return True

    def _require_history_visible(self, request: HttpRequest, object_id: str) -> None:
        """404 unless the object is in this user's admin queryset, or is deleted and its last state is
        theirs to see: another team's training is "does not exist", as on its change page."""
        pk = unquote(object_id)
        try:
            if self.get_queryset(request).filter(pk=pk).exists():
                return
            if self.model._default_manager.filter(pk=pk).exists():
                raise Http404("no such object")
        except (ValueError, TypeError, ValidationError) as exc:  # not a valid key for this model
            raise Http404("no such object") from exc
        history = self.model.history.filter(**{self.model._meta.pk.attname: pk})
        last = history.order_by("-history_date").first()
        if last is None or not self.history_visible_when_deleted(request, last.instance):
            raise Http404("no such object")
