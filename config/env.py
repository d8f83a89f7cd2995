"""Strict readers for settings that come from the environment.

Each helper fails loudly (ImproperlyConfigured naming the variable) on a value it cannot parse, so a typo
in production configuration stops the process at start-up instead of silently falling back to a default.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TypeVar

from django.core.exceptions import ImproperlyConfigured

_N = TypeVar("_N", int, float)
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def env_str(name: str, default: str) -> str:
    return os.environ.get(name, default)


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ImproperlyConfigured(
        f"{name}={raw!r} is not a boolean (use one of 1/0, true/false, yes/no, on/off)"
    )


def env_int(name: str, default: int, *, minimum: int | None = None, maximum: int | None = None) -> int:
    return _env_number(name, default, int, "an integer", minimum=minimum, maximum=maximum)


def env_float(name: str, default: float, *, minimum: float | None = None) -> float:
    return _env_number(name, default, float, "a number", minimum=minimum, maximum=None)


def _env_number(
    name: str, default: _N, parse: Callable[[str], _N], kind: str, *, minimum: _N | None, maximum: _N | None
) -> _N:
    """The variable parsed by `parse`, within its bounds; ImproperlyConfigured naming it otherwise."""
    raw = os.environ.get(name)
    if raw is None:
        return default
    try:
        value = parse(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={raw!r} is not {kind}") from None
    if minimum is not None and value < minimum:
        raise ImproperlyConfigured(f"{name}={value} is below the minimum {minimum}")
    if maximum is not None and value > maximum:
        raise ImproperlyConfigured(f"{name}={value} is above the maximum {maximum}")
    return value


def env_list(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw is None:
        return default
    return [item.strip() for item in raw.split(",") if item.strip()]
