from __future__ import annotations

from django.contrib import admin
from django.urls import include, path
from django.views.generic import RedirectView
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from common.http.session_free import session_free
from reminders.admin.time_zone import time_zone_view
from reminders.ops import views as ops_views
from trainings.admin.analytics_page import analytics_view
from trainings.admin.dead_letters import dead_letters_replay_view, dead_letters_view
from trainings.admin.status_page import status_retry_view, status_retrying_view, status_view
from trainings.answers.views import AnswerLinkView

urlpatterns = [
    # A signed answer link, followed without a session (trainings/answers/links.py): first, because it is
    # the most requested URL (one per tap on a reminder) and resolving it behind the API's routers cost
    # more CPU than the view's own Python.
    path("api/answer-links/<str:token>/", session_free(AnswerLinkView.as_view()), name="answer-link"),
    # --- Admin pages for coaches and operators, before admin/ whose catch-all would take them.
    path("", RedirectView.as_view(pattern_name="admin:index"), name="home"),
    path("admin/status/", admin.site.admin_view(status_view), name="admin-status"),
    path("admin/status/retry/", admin.site.admin_view(status_retry_view), name="admin-status-retry"),
    path("admin/status/retrying/", admin.site.admin_view(status_retrying_view), name="admin-status-retrying"),
    path("admin/push-dead-letters/", admin.site.admin_view(dead_letters_view), name="admin-dead-letters"),
    path(
        "admin/push-dead-letters/replay/",
        admin.site.admin_view(dead_letters_replay_view),
        name="admin-dead-letters-replay",
    ),
    path("admin/analytics/", admin.site.admin_view(analytics_view), name="admin-analytics"),
    path("admin/time-zone/", admin.site.admin_view(time_zone_view), name="admin-time-zone"),
    # ---
    path("admin/", admin.site.urls),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="api-docs"),
    path("api/", include("reminders.http.urls")),
    path("api/", include("trainings.urls")),
    # Email links: the answer page, one-click unsubscribe (the domain's), the provider's tracking webhook.
    path("", include("trainings.answers.email_urls")),
    path("", include("delivery.channels.email.urls")),
]

# --- Operations: Prometheus metrics and health probes (reminders/ops/views.py) --------------------------
urlpatterns += [
    path("metrics", ops_views.metrics, name="metrics"),
    path("health/live", ops_views.live, name="health-live"),
    path("health/ready", ops_views.ready, name="health-ready"),
]

# A path no URL matches answers JSON under /api/ (reminders/http/limits.py).
handler404 = "reminders.http.limits.page_not_found"
# The other errors Django answers itself (an unhandled exception, a SuspiciousOperation, Django's
# PermissionDenied) are JSON under /api/ too, with no traceback (common/http/errors.py).
handler500 = "common.http.errors.server_error"
handler400 = "common.http.errors.bad_request"
handler403 = "common.http.errors.permission_denied"
