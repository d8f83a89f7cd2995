"""The person's own admin settings page (/admin/time-zone/): the zone their times are shown in."""

from __future__ import annotations

from django import forms
from django.contrib import admin, messages
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme

from reminders.models import UserPreference, _time_zone_names


class TimeZoneForm(forms.Form):
    time_zone = forms.ChoiceField(
        choices=[], help_text="Lists, timelines, pushes and the status page show times in this zone."
    )

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.fields["time_zone"].choices = [(name, name) for name in sorted(_time_zone_names())]  # type: ignore[attr-defined]


def time_zone_view(request: HttpRequest) -> HttpResponse:
    preference = UserPreference.objects.filter(user=request.user).first()  # type: ignore[misc]
    current = preference.time_zone if preference else "UTC"
    form = TimeZoneForm(request.POST or None, initial={"time_zone": current})
    if request.method == "POST" and form.is_valid():
        UserPreference.objects.update_or_create(
            user=request.user,
            defaults={"time_zone": form.cleaned_data["time_zone"]},  # type: ignore[misc]
        )
        messages.success(request, f"Times are now shown in {form.cleaned_data['time_zone']}.")
        target = request.POST.get("next", "")
        if not url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()}):
            target = reverse("admin:index")
        return HttpResponseRedirect(target)
    context = {
        **admin.site.each_context(request),
        "title": "Your time zone",
        "form": form,
        "next": request.GET.get("next", ""),
    }
    return TemplateResponse(request, "admin/time_zone.html", context, status=400 if form.errors else 200)
