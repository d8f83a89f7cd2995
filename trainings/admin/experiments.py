"""Timing experiments in the admin (operators): start one on a rule with up to two variants, read how each
arm does, stop it (everyone back on the rule) or promote a variant (its offsets become the rule's).

Every change goes through trainings/experiments/control.py; the page shows trainings/experiments/results.py.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import path, reverse
from django.utils.translation import gettext_lazy as _

from trainings.admin.offsets_field import OffsetsField
from trainings.admin.operators import _OperatorsOnly
from trainings.experiments.adaptive_checks import adaptive_variants_check
from trainings.experiments.adaptive_page import adaptive_context
from trainings.experiments.control import experiment_promote, experiment_start, experiment_stop
from trainings.experiments.results import CONFIDENCES, ArmResult, experiment_results
from trainings.models import Experiment, ExperimentStatus, ReminderRule
from trainings.models.experiments import ExperimentMode
from trainings.planning import kinds
from trainings.planning.offsets import validate_offsets

VARIANT_FIELDS = 2  # variants the start form offers (the service takes up to MAX_VARIANTS)


class ExperimentStartForm(forms.ModelForm):
    """The rule, a name and the variants' offsets as typed ("120m, 45m, 15m")."""

    variant_1_label = forms.CharField(max_length=50, required=False, initial="variant A")
    variant_1_offsets = OffsetsField(help_text='e.g. "120m, 45m, 15m", counted like the rule\'s.')
    variant_2_label = forms.CharField(max_length=50, required=False)
    variant_2_offsets = OffsetsField(required=False, help_text="Optional: a second variant.")

    class Meta:
        model = Experiment
        fields = ["rule", "name", "mode"]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        rule = self.fields["rule"]
        assert isinstance(rule, forms.ModelChoiceField)
        rule.queryset = ReminderRule.objects.filter(active=True, experiment__isnull=True)
        rule.help_text = "An active rule with no experiment running."
        mode = self.fields["mode"]
        mode.required, mode.initial = False, ExperimentMode.FIXED  # a form without it: the fixed split
        mode.help_text = _(
            "Adaptive: each training's players are drawn into arms by Thompson sampling, and the winner is "
            "promoted by the stopping rule (docs/operations/adaptive-timing.md). No arm may remind more "
            "often than the rule."
        )

    def clean_mode(self) -> str:
        return self.cleaned_data.get("mode") or ExperimentMode.FIXED

    def variants(self) -> list[tuple[str, list[str]]]:
        out = []
        for n in range(1, VARIANT_FIELDS + 1):
            offsets = self.cleaned_data.get(f"variant_{n}_offsets") or []
            if offsets:
                out.append((self.cleaned_data.get(f"variant_{n}_label") or f"variant {n}", offsets))
        return out

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        rule = data.get("rule")
        if rule is not None and kinds.of(rule.kind).to == "coaches":
            refusal = ("A coaches' rule (a digest, an alert) reminds no player: a timing experiment, which "
                       "splits players between arms, has nothing to compare.")  # fmt: skip
            self.add_error("rule", refusal)
            return data
        for n in range(1, VARIANT_FIELDS + 1):
            offsets = data.get(f"variant_{n}_offsets") or []
            if not offsets:
                continue
            try:
                validate_offsets(offsets)
            except ValidationError as exc:
                self.add_error(f"variant_{n}_offsets", exc)
                continue
            if rule is not None and sorted(offsets) == sorted(map(str, rule.parsed_offsets())):
                self.add_error(f"variant_{n}_offsets", "The same offsets as the rule: nothing to compare.")
        if rule is not None and data.get("mode") == ExperimentMode.ADAPTIVE and not self.errors:
            try:
                adaptive_variants_check(rule, self.variants())
            except ValidationError as exc:
                self.add_error(None, exc.message_dict["variants"])
        return data


def _bar(arm: ArmResult) -> dict[str, str]:
    """The rate and its interval on a 0-100 % bar, as CSS percentages."""
    if arm.rate is None:
        return {}
    return {"left": f"{100 * arm.low:.1f}%", "width": f"{100 * (arm.high - arm.low):.1f}%",
            "point": f"{100 * arm.rate:.1f}%", "rate": f"{100 * arm.rate:.1f} %",
            "interval": f"{100 * arm.low:.1f} to {100 * arm.high:.1f} %"}  # fmt: skip


@admin.register(Experiment)
class ExperimentAdmin(_OperatorsOnly, admin.ModelAdmin):
    list_display = ["name", "rule", "mode", "status", "started_at", "stopped_at", "arms"]
    list_filter = ["status", "mode"]
    change_form_template = "admin/trainings/experiment/change_form.html"

    def get_form(
        self, request: HttpRequest, obj: Experiment | None = None, change: bool = False, **kwargs: Any
    ) -> Any:
        if obj is None:
            kwargs["form"] = ExperimentStartForm
        return super().get_form(request, obj, change, **kwargs)

    def get_fields(self, request: HttpRequest, obj: Experiment | None = None) -> Any:
        if obj is None:
            return ["rule", "name", "mode", *(f"variant_{n}_{part}" for n in range(1, VARIANT_FIELDS + 1)
                                      for part in ("label", "offsets"))]  # fmt: skip
        return ["name", "rule", "mode", "status", "started_at", "stopped_at", "promoted", "arms"]

    def get_readonly_fields(self, request: HttpRequest, obj: Experiment | None = None) -> Any:
        return [] if obj is None else self.get_fields(request, obj)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # read-only once started: the page's buttons stop or promote it

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # its figures stay readable; stopping is the way out

    @admin.display(description="arms")
    def arms(self, experiment: Experiment) -> str:
        variants = "; ".join(f"{v}: {', '.join(v.offsets)}" for v in experiment.variants.all())
        return f"rule: {', '.join(experiment.control_offsets)}; {variants}"

    def save_model(self, request: HttpRequest, obj: Experiment, form: Any, change: bool) -> None:
        started = experiment_start(rule=obj.rule, name=obj.name, variants=form.variants(), mode=obj.mode)
        obj.pk = started.pk
        obj.refresh_from_db()  # the admin's redirect and message read the row experiment_start wrote
        self.message_user(request, "Started: the rule's future trainings are being rescheduled.")

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        experiment = self.get_object(request, object_id)
        context = dict(extra_context or {})
        if experiment is not None:
            try:
                confidence = float(request.GET.get("confidence", 0.95))
            except ValueError:
                confidence = 0.95
            confidence = confidence if confidence in CONFIDENCES else 0.95
            result = experiment_results(experiment, confidence=confidence)
            context.update(
                result=result,
                rows=[(arm, _bar(arm)) for arm in result.arms],
                confidences=CONFIDENCES,
                running=experiment.status == ExperimentStatus.RUNNING,
                variants=list(experiment.variants.all()),
                adaptive=adaptive_context(experiment, result),
            )
        return super().change_view(request, object_id, form_url, extra_context=context)

    def get_urls(self) -> list[Any]:
        return [
            path("<path:object_id>/stop/", self.admin_site.admin_view(self.stop_view),
                 name="trainings_experiment_stop"),
            path("<path:object_id>/promote/", self.admin_site.admin_view(self.promote_view),
                 name="trainings_experiment_promote"),
            *super().get_urls(),
        ]  # fmt: skip

    def _for_action(self, request: HttpRequest, object_id: str) -> Experiment:
        if request.method != "POST":
            raise PermissionDenied("POST only")
        if not self._operator(request):
            raise PermissionDenied
        experiment = self.get_object(request, object_id)
        if experiment is None:
            raise PermissionDenied("no such experiment")
        return experiment

    def _back(self, experiment: Experiment) -> HttpResponseRedirect:
        return HttpResponseRedirect(reverse("admin:trainings_experiment_change", args=[experiment.pk]))

    def stop_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        experiment = self._for_action(request, object_id)
        try:
            experiment_stop(experiment=experiment)
        except ValidationError as exc:
            self.message_user(request, " ".join(exc.messages), messages.ERROR)
        else:
            self.message_user(request, "Stopped: everyone is back on the rule's offsets.")
        return self._back(experiment)

    def promote_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        experiment = self._for_action(request, object_id)
        variant = experiment.variants.filter(arm=request.POST.get("arm") or 0).first()
        if variant is None:
            self.message_user(request, "Choose one of the experiment's variants.", messages.ERROR)
            return self._back(experiment)
        try:
            experiment_promote(experiment=experiment, variant=variant)
        except ValidationError as exc:
            self.message_user(request, " ".join(exc.messages), messages.ERROR)
        else:
            self.message_user(
                request, f"Promoted {variant}: the rule now reminds at {', '.join(variant.offsets)}."
            )
        return self._back(experiment)
