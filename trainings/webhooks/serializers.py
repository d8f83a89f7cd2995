"""A subscription as the API reads and answers it. Its secret is in the creation's answer only."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from common.serializers import StrictSerializer
from reminders.api import callback_url_refusal
from trainings.models import WebhookEvent, WebhookSubscription


class WebhookInputSerializer(StrictSerializer):
    url = serializers.URLField(
        max_length=2000, help_text="Where the events are POSTed: http(s), a public host (no credentials)."
    )
    events = serializers.ListField(
        child=serializers.ChoiceField(choices=WebhookEvent.choices),
        min_length=1,
        max_length=len(WebhookEvent.choices),
        help_text="The event types to receive.",
    )

    def validate_url(self, value: str) -> str:
        refusal = callback_url_refusal(value)
        if refusal is not None:
            raise serializers.ValidationError(refusal)
        return value

    def validate_events(self, value: list[str]) -> list[str]:
        if len(set(value)) != len(value):
            raise serializers.ValidationError("each event type once.")
        return value


class WebhookSerializer(serializers.ModelSerializer):
    events = serializers.ListField(
        child=serializers.ChoiceField(choices=WebhookEvent.choices), read_only=True
    )
    status = serializers.SerializerMethodField(help_text="active, or disabled (disabled_reason says why).")
    disabled_at = serializers.DateTimeField(read_only=True, allow_null=True)
    disabled_reason = serializers.CharField(read_only=True)

    class Meta:
        model = WebhookSubscription
        fields = ["id", "url", "events", "status", "created_at", "disabled_at", "disabled_reason"]

    @extend_schema_field(serializers.ChoiceField(choices=["active", "disabled"]))
    def get_status(self, subscription: WebhookSubscription) -> str:
        return "active" if subscription.active else "disabled"


class WebhookCreatedSerializer(WebhookSerializer):
    secret = serializers.CharField(
        help_text="The signing secret (Standard Webhooks, `whsec_` + base64): shown in this answer only."
    )

    class Meta(WebhookSerializer.Meta):
        fields = [*WebhookSerializer.Meta.fields, "secret"]
