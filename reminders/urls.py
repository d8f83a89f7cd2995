from __future__ import annotations

from rest_framework.routers import DefaultRouter

from reminders.views import JobViewSet, OccurrenceViewSet
from reminders.views_schedules import ScheduleViewSet, ThrottlePolicyViewSet

router = DefaultRouter()
router.register("jobs", JobViewSet, basename="job")
router.register("occurrences", OccurrenceViewSet, basename="occurrence")
router.register("schedules", ScheduleViewSet, basename="schedule")
router.register("throttle-policies", ThrottlePolicyViewSet, basename="throttle-policy")

urlpatterns = router.urls
