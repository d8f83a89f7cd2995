from __future__ import annotations

from rest_framework.routers import DefaultRouter

from reminders.views import JobViewSet, OccurrenceViewSet

router = DefaultRouter()
router.register("jobs", JobViewSet, basename="job")
router.register("occurrences", OccurrenceViewSet, basename="occurrence")

urlpatterns = router.urls
