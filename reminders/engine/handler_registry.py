"""Registry of in-process callback handlers.

Only a name registered here can be a `handler` callback's target: the API never imports an arbitrary
dotted path a caller sends. Apps register theirs in a `handlers` module, discovered at start-up.

A handler takes one delivery (`register`) or a whole chunk of them (`register_batch`: up to 50 due
occurrences of that handler at once, returning the errors keyed by occurrence id), which lets an app read
and write what the chunk needs in a few statements instead of a few per occurrence. A batch handler may
also give an `order`: the engine puts a claim's deliveries of that handler in that order before cutting
them into chunks, so an app can run the small units of a storm before a big one (no team waits behind a
bigger one).

A handler runs with the project's rights, so by default API callers cannot name it: only `api=True`
handlers are accepted by the jobs and schedules API. An app that creates its jobs itself reserves their
key pattern (`keys_reserve`), so no API caller can take such a key before the app does.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, TypeAlias, TypeVar

if TYPE_CHECKING:
    # For the annotations only: reminders.transports imports this registry (its handler transport).
    from reminders.transports.base import Delivery, TransportError

HandlerFn: TypeAlias = Callable[["Delivery"], None]
BatchHandlerFn: TypeAlias = Callable[[Sequence["Delivery"]], Mapping[int, "TransportError"]]
OrderFn: TypeAlias = Callable[[Sequence["Delivery"]], Sequence["Delivery"]]

_Fn = TypeVar("_Fn", HandlerFn, BatchHandlerFn)

_registry: dict[str, HandlerFn] = {}
_batch_registry: dict[str, BatchHandlerFn] = {}
_orders: dict[str, OrderFn] = {}
_api_allowed: set[str] = set()
_reserved_keys: list[tuple[re.Pattern[str], str]] = []


def register(name: str, *, api: bool = False) -> Callable[[HandlerFn], HandlerFn]:
    """Register a handler called once per occurrence; `api=True` lets API callers schedule it."""
    return _registering(_registry, name, api)


def register_batch(
    name: str, *, api: bool = False, order: OrderFn | None = None
) -> Callable[[BatchHandlerFn], BatchHandlerFn]:
    """Register a handler called once per chunk; `api=True` lets API callers schedule it.

    `order(deliveries)` returns the same deliveries in the order they should run; it is asked only when
    more of them are due together than one chunk holds (the order inside a chunk is the handler's own).
    """
    if order is None:
        _orders.pop(name, None)
    else:
        _orders[name] = order
    return _registering(_batch_registry, name, api)


def _registering(registry: dict[str, _Fn], name: str, api: bool) -> Callable[[_Fn], _Fn]:
    """The decorator that files a handler under `name` in `registry` (a name may serve only one)."""

    def decorator(fn: _Fn) -> _Fn:
        _check_free(name, fn)
        registry[name] = fn
        _set_api(name, api)
        return fn

    return decorator


def _set_api(name: str, api: bool) -> None:
    if api:
        _api_allowed.add(name)
    else:
        _api_allowed.discard(name)


def _check_free(name: str, fn: object) -> None:
    existing = _registry.get(name) or _batch_registry.get(name)
    if existing is not None and existing is not fn:
        raise ValueError(f"handler {name!r} is already registered to {existing!r}")


def get(name: str) -> HandlerFn | None:
    return _registry.get(name)


def get_batch(name: str) -> BatchHandlerFn | None:
    return _batch_registry.get(name)


def get_order(name: str) -> OrderFn | None:
    return _orders.get(name)


def exists(name: str) -> bool:
    return name in _registry or name in _batch_registry


def names() -> list[str]:
    return sorted({*_registry, *_batch_registry})


def api_allowed(name: str) -> bool:
    """May an API caller (jobs, bulk, schedules) name this handler as a callback?"""
    return name in _api_allowed and exists(name)


def api_names() -> list[str]:
    return sorted(name for name in names() if name in _api_allowed)


def keys_reserve(pattern: str, *, owner: str) -> None:
    """Keep job keys matching `pattern` away from API callers: they can neither create nor see them.

    For an app that creates and manages jobs itself: a key an API caller took first would otherwise block
    it. `pattern` is matched from the start, case-insensitively, in Python and as a database regex (so
    keep to syntax both understand: classes, counts, literals).
    """
    compiled = re.compile(pattern, re.IGNORECASE)
    if all(existing.pattern != compiled.pattern for existing, _ in _reserved_keys):
        _reserved_keys.append((compiled, owner))


def reserved_key_patterns() -> list[str]:
    return [pattern.pattern for pattern, _ in _reserved_keys]


def key_reserved_by(key: str) -> str | None:
    """Who reserved the namespace this key falls in, or None when an API caller may use it."""
    for pattern, owner in _reserved_keys:
        if pattern.match(key):
            return owner
    return None
