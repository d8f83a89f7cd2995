"""Registry of in-process callback handlers.

Only a name registered here can be a `handler` callback's target: the API never imports an arbitrary
dotted path a caller sends. Apps register theirs in a `handlers` module, discovered at start-up.
"""

from __future__ import annotations

from collections.abc import Callable

from reminders.transports.base import Delivery

HandlerFn = Callable[[Delivery], None]

_registry: dict[str, HandlerFn] = {}


def register(name: str) -> Callable[[HandlerFn], HandlerFn]:
    def decorator(fn: HandlerFn) -> HandlerFn:
        existing = _registry.get(name)
        if existing is not None and existing is not fn:
            raise ValueError(f"handler {name!r} is already registered to {existing!r}")
        _registry[name] = fn
        return fn

    return decorator


def get(name: str) -> HandlerFn | None:
    return _registry.get(name)


def names() -> list[str]:
    return sorted(_registry)
