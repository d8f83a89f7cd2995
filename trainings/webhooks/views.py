"""The subscriptions API: `GET/POST /api/webhooks/`, `DELETE /api/webhooks/{id}/`.

For integration callers (`trainings.use_integration_api`), who see and manage their own subscriptions,
and operators (`trainings.manage_all_teams`, superusers), who see and remove everyone's. Anyone else
signed in is a 403.
"""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import mixins, status, viewsets
from rest_framework.permissions import BasePermission, IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response

from trainings.models import WebhookSubscription
from trainings.selectors import user_sees_all_teams
from trainings.webhooks.serializers import WebhookCreatedSerializer, WebhookInputSerializer, WebhookSerializer
from trainings.webhooks.subscriptions import subscription_create, subscription_delete

INTEGRATION_PERMISSION = "trainings.use_integration_api"


class IsIntegrationCaller(BasePermission):
    message = (
        "Webhooks are for integration callers (trainings.use_integration_api) and operators "
        "(trainings.manage_all_teams)."
    )

    def has_permission(self, request: Request, view: Any) -> bool:
        return request.user.has_perm(INTEGRATION_PERMISSION) or user_sees_all_teams(request.user)


_403 = OpenApiResponse(description="Not an integration caller or an operator.")


@extend_schema_view(
    list=extend_schema(
        responses={200: WebhookSerializer(many=True), 403: _403},
        description="Your subscriptions (an operator's: everyone's), without their secrets.",
    ),
    create=extend_schema(
        request=WebhookInputSerializer,
        responses={
            201: WebhookCreatedSerializer,
            400: OpenApiResponse(description="The field and the reason: a URL the service will not call "
                                             "(private or loopback host, credentials), an unknown event."),
            403: _403,
        },
        description="Subscribe a URL to events. The answer holds the signing secret, never shown again.",
    ),
    destroy=extend_schema(
        responses={204: None, 403: _403, 404: OpenApiResponse(description="Not one of yours.")},
        description="Remove a subscription; its deliveries not yet made are cancelled.",
    ),
)  # fmt: skip
class WebhookViewSet(
    mixins.ListModelMixin, mixins.CreateModelMixin, mixins.DestroyModelMixin, viewsets.GenericViewSet
):
    """Signed events back to the platform (docs/api.md, "Events (webhooks)")."""

    serializer_class = WebhookSerializer
    permission_classes = [IsAuthenticated, IsIntegrationCaller]

    def get_queryset(self) -> QuerySet[WebhookSubscription]:
        subscriptions = WebhookSubscription.objects.order_by("pk")
        if user_sees_all_teams(self.request.user):
            return subscriptions
        return subscriptions.filter(owner=self.request.user.pk)

    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        data = WebhookInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        subscription = subscription_create(owner=request.user, **data.validated_data)
        return Response(WebhookCreatedSerializer(subscription).data, status=status.HTTP_201_CREATED)

    def perform_destroy(self, instance: WebhookSubscription) -> None:
        subscription_delete(subscription=instance)
