from __future__ import annotations

from rest_framework.routers import SimpleRouter

from trainings.views import ReminderRuleViewSet, TrainingViewSet

# SimpleRouter: the reminders router already serves the API root at /api/.
router = SimpleRouter()
router.register("trainings", TrainingViewSet, basename="training")
router.register("reminder-rules", ReminderRuleViewSet, basename="reminder-rule")

urlpatterns = router.urls
