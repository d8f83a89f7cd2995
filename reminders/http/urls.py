from __future__ import annotations

from rest_framework.routers import DefaultRouter

from reminders.http.schedule_views import ScheduleViewSet, ThrottlePolicyViewSet
from reminders.http.views import JobViewSet, OccurrenceViewSet

router = DefaultRouter()
router.register("jobs", JobViewSet, basename="job")
router.register("occurrences", OccurrenceViewSet, basename="occurrence")
router.register("schedules", ScheduleViewSet, basename="schedule")
router.register("throttle-policies", ThrottlePolicyViewSet, basename="throttle-policy")

urlpatterns = router.urls
