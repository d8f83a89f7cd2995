"""The admin's box for a list of offsets, typed as a person writes them: one field for the reminder rule's
form and the experiment form, reading text through `trainings.planning.offsets.offsets_from_text`."""

from __future__ import annotations

from typing import Any

from django import forms

from trainings.planning.offsets import offsets_from_text
from trainings.reminding.critical import ALL


class OffsetsField(forms.Field):
    """Offsets typed and shown as a person writes them, "90m, 75m, 15m" (stored as a list); with
    `allow_all`, the word "all" too. The items are checked by the model's or the form's validators."""

    widget = forms.TextInput(attrs={"class": "vTextField", "placeholder": "90m, 75m, 15m"})

    def __init__(self, *, allow_all: bool = False, **kwargs: Any) -> None:
        self.allow_all = allow_all
        super().__init__(**kwargs)

    def prepare_value(self, value: Any) -> Any:
        return ", ".join(map(str, value)) if isinstance(value, list) else value

    def to_python(self, value: Any) -> list[str] | str:
        text = "" if value is None else str(value).strip()
        if self.allow_all and text.lower() == ALL:
            return ALL
        return offsets_from_text(text)

    def has_changed(self, initial: Any, data: Any) -> bool:
        return self.to_python(self.prepare_value(initial)) != self.to_python(data)
