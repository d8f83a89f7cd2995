from __future__ import annotations

import pytest
from django.core.exceptions import ImproperlyConfigured

from config.env import env_bool, env_float, env_int, env_list


def test_strict_helpers_refuse_values_they_cannot_parse(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("X_BOOL", "maybe")
    monkeypatch.setenv("X_INT", "ten")
    monkeypatch.setenv("X_FLOAT", "1,5")
    monkeypatch.setenv("X_SMALL", "0")
    with pytest.raises(ImproperlyConfigured, match="X_BOOL"):
        env_bool("X_BOOL", False)
    with pytest.raises(ImproperlyConfigured, match="X_INT"):
        env_int("X_INT", 1)
    with pytest.raises(ImproperlyConfigured, match="X_FLOAT"):
        env_float("X_FLOAT", 1.0)
    with pytest.raises(ImproperlyConfigured, match="minimum"):
        env_int("X_SMALL", 5, minimum=1)


def test_strict_helpers_read_good_values_and_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("X_BOOL", "Yes")
    monkeypatch.setenv("X_LIST", "a, b,,c")
    assert env_bool("X_BOOL", False) is True
    assert env_list("X_LIST", []) == ["a", "b", "c"]
    assert env_int("X_UNSET", 7) == 7


@pytest.mark.django_db
def test_migrations_match_models() -> None:
    from django.core.management import call_command

    call_command("makemigrations", "--check", "--dry-run", verbosity=0)
