from __future__ import annotations

from rest_framework.routers import SimpleRouter

from trainings.views import TrainingViewSet

# SimpleRouter: the reminders router already serves the API root at /api/.
router = SimpleRouter()
router.register("trainings", TrainingViewSet, basename="training")

urlpatterns = router.urls
