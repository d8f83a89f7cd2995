from __future__ import annotations

from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from reminders import views_ops

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="api-docs"),
    path("api/", include("reminders.urls")),
    path("api/", include("trainings.urls")),
]

# --- Operations: Prometheus metrics and health probes (reminders/views_ops.py) --------------------------
urlpatterns += [
    path("metrics", views_ops.metrics, name="metrics"),
    path("health/live", views_ops.live, name="health-live"),
    path("health/ready", views_ops.ready, name="health-ready"),
]
