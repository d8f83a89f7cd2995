"""The platform's keys on roster rows (teams, players, guardians): `owner`, the caller that created the
row, and `external_id`, the caller's own id for it, unique per owner (trainings/roster/)."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

EXTERNAL_ID_MAX = 200


def owner_field(kind: str) -> models.ForeignKey:
    """The user (an integration caller, an operator or a coach) that created the row through the API. A
    removed account leaves its rows in place, unowned: their external ids then belong to no one."""
    return models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name=f"owned_{kind}",
        editable=False,
        help_text="Who created it through the API; its external_id is theirs.",
    )


def external_id_field() -> models.CharField:
    return models.CharField(
        max_length=EXTERNAL_ID_MAX,
        null=True,
        blank=True,
        help_text="The owner's own id for it (unique per owner).",
    )


def external_id_unique(kind: str) -> models.UniqueConstraint:
    """One row per (owner, external_id); rows without an external id are not keyed."""
    return models.UniqueConstraint(
        fields=["owner", "external_id"],
        condition=Q(external_id__isnull=False),
        name=f"{kind}_external_id_unique_per_owner",
    )
