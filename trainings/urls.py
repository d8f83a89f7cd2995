from __future__ import annotations

from django.urls import path
from rest_framework.routers import SimpleRouter

from trainings.analytics.views import EffectivenessView, PlayersView
from trainings.digest.views import CoachDeviceViewSet, CoachProfileView
from trainings.experiments.views import ExperimentViewSet
from trainings.guardians.views import (
    GuardianDeviceViewSet,
    GuardianPreferencesView,
    GuardianTrainingsView,
    GuardianViewSet,
)
from trainings.roster.views import PlayerViewSet, RosterSyncView, TeamMembersView, TeamViewSet
from trainings.views import PlayerDeviceViewSet, PlayerPreferencesView, ReminderRuleViewSet, TrainingViewSet
from trainings.webhooks.views import WebhookViewSet

# SimpleRouter: the reminders router already serves the API root at /api/.
router = SimpleRouter()
router.register("trainings", TrainingViewSet, basename="training")
router.register("reminder-rules", ReminderRuleViewSet, basename="reminder-rule")
router.register("guardians", GuardianViewSet, basename="guardian")
router.register("experiments", ExperimentViewSet, basename="experiment")
# Events back to the platform (trainings/webhooks/).
router.register("webhooks", WebhookViewSet, basename="webhook")
router.register("teams", TeamViewSet, basename="team")
router.register("players", PlayerViewSet, basename="player")

urlpatterns = [
    *router.urls,
    # The roster (trainings/roster/): a team's active members, and the bulk sync by external ids.
    path("teams/<int:team_pk>/members/", TeamMembersView.as_view(), name="team-members"),
    path("roster/", RosterSyncView.as_view(), name="roster-sync"),
    # What the reminders achieve (trainings/analytics/).
    path("analytics/offsets/", EffectivenessView.as_view(), name="analytics-offsets"),
    path("analytics/players/", PlayersView.as_view(), name="analytics-players"),
    # A player's push devices (trainings/devices/registration.py).
    path(
        "players/<int:player_pk>/devices/",
        PlayerDeviceViewSet.as_view({"get": "list", "post": "create"}),
        name="player-devices",
    ),
    path("players/<int:player_pk>/preferences/", PlayerPreferencesView.as_view(), name="player-preferences"),
    path(
        "players/<int:player_pk>/devices/<int:pk>/",
        PlayerDeviceViewSet.as_view({"delete": "destroy"}),
        name="player-device",
    ),
    # A coach's own digest settings and devices (trainings/digest/).
    path("coach/", CoachProfileView.as_view(), name="coach-profile"),
    path(
        "coach/devices/", CoachDeviceViewSet.as_view({"get": "list", "post": "create"}), name="coach-devices"
    ),
    path("coach/devices/<int:pk>/", CoachDeviceViewSet.as_view({"delete": "destroy"}), name="coach-device"),
    # A guardian's own devices, preferences and players' trainings (trainings/guardians/).
    path(
        "guardians/<int:guardian_pk>/devices/",
        GuardianDeviceViewSet.as_view({"get": "list", "post": "create"}),
        name="guardian-devices",
    ),
    path(
        "guardians/<int:guardian_pk>/devices/<int:pk>/",
        GuardianDeviceViewSet.as_view({"delete": "destroy"}),
        name="guardian-device",
    ),
    path(
        "guardians/<int:guardian_pk>/preferences/",
        GuardianPreferencesView.as_view(),
        name="guardian-preferences",
    ),
    path(
        "guardians/<int:guardian_pk>/trainings/", GuardianTrainingsView.as_view(), name="guardian-trainings"
    ),
]
