"""Registry of in-process callback handlers.

Only a name registered here can be a `handler` callback's target: the API never imports an arbitrary
dotted path a caller sends. Apps register theirs in a `handlers` module, discovered at start-up.

A handler takes one delivery (`register`) or a whole chunk of them (`register_batch`: up to 50 due
occurrences of that handler at once, returning the errors keyed by occurrence id), which lets an app read
and write what the chunk needs in a few statements instead of a few per occurrence.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from reminders.transports.base import Delivery, TransportError

HandlerFn = Callable[[Delivery], None]
BatchHandlerFn = Callable[[Sequence[Delivery]], Mapping[int, TransportError]]

_registry: dict[str, HandlerFn] = {}
_batch_registry: dict[str, BatchHandlerFn] = {}


def register(name: str) -> Callable[[HandlerFn], HandlerFn]:
    def decorator(fn: HandlerFn) -> HandlerFn:
        _check_free(name, fn)
        _registry[name] = fn
        return fn

    return decorator


def register_batch(name: str) -> Callable[[BatchHandlerFn], BatchHandlerFn]:
    def decorator(fn: BatchHandlerFn) -> BatchHandlerFn:
        _check_free(name, fn)
        _batch_registry[name] = fn
        return fn

    return decorator


def _check_free(name: str, fn: object) -> None:
    existing = _registry.get(name) or _batch_registry.get(name)
    if existing is not None and existing is not fn:
        raise ValueError(f"handler {name!r} is already registered to {existing!r}")


def get(name: str) -> HandlerFn | None:
    return _registry.get(name)


def get_batch(name: str) -> BatchHandlerFn | None:
    return _batch_registry.get(name)


def exists(name: str) -> bool:
    return name in _registry or name in _batch_registry


def names() -> list[str]:
    return sorted({*_registry, *_batch_registry})
