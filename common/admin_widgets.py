"""Admin form pieces both apps use. A select for long fixed lists (every IANA zone, every language):
Django renders each option through a template, which for ~600 zones costs more than the rest of a change
page; this one writes the options' HTML once per process and only marks the selected value per render.
And a JSON value shown indented."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from functools import cache
from typing import Any

from django import forms
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe


@cache
def _options(choices: tuple[tuple[str, str], ...]) -> dict[str, str]:
    """Each value's <option> markup, built once for a list of choices."""
    return {value: format_html('<option value="{}">{}</option>', value, label) for value, label in choices}


class LongSelect(forms.Select):
    def __init__(self, choices: Callable[[], Sequence[tuple[str, str]]], attrs: dict[str, Any] | None = None):
        super().__init__(attrs=attrs)
        self._choices_of = choices

    def render(
        self, name: str, value: Any, attrs: dict[str, Any] | None = None, renderer: Any = None
    ) -> SafeString:
        options = _options(tuple(self._choices_of()))
        chosen = "" if value is None else str(value)
        html = "".join(
            option.replace("<option ", "<option selected ", 1) if key == chosen else option
            for key, option in options.items()
        )
        final = {"name": name, **self.build_attrs(self.attrs, attrs)}  # name first, as Django writes it
        shown = [(k, v) for k, v in final.items() if v is not False and v is not None]
        attributes = format_html_join(
            "",
            "{}",
            ((format_html(" {}", k) if v is True else format_html(' {}="{}"', k, v),) for k, v in shown),
        )
        return format_html("<select{}>{}</select>", attributes, mark_safe(html))  # noqa: S308 - escaped above


@cache
def _zone_names() -> tuple[tuple[str, str], ...]:
    from zoneinfo import available_timezones

    return tuple((name, name.replace("_", " ")) for name in sorted(available_timezones()))


def zone_choices(*, blank: str | None = None) -> list[tuple[str, str]]:
    """Every IANA zone, for a select a person types into to jump (no free text to mistype)."""
    return ([("", blank)] if blank is not None else []) + list(_zone_names())


def zone_field(*, blank: str | None = None, **kwargs: Any) -> forms.ChoiceField:
    """A form field choosing an IANA zone from the list (rendered by LongSelect)."""
    return forms.ChoiceField(
        choices=zone_choices(blank=blank),
        widget=LongSelect(lambda: zone_choices(blank=blank)),
        **kwargs,
    )


def pretty_json(value: Any) -> SafeString:
    """A JSON value indented and escaped, for a secondary, collapsed section of a detail page."""
    text = json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True, default=str)
    return format_html('<pre class="json">{}</pre>', text)
