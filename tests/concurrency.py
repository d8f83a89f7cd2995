"""Run the same function in several threads at once, each on its own database connection."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

from django.db import connections

T = TypeVar("T")


def run_together(fn: Callable[[int], T], count: int = 2) -> list[T]:
    """Start `count` threads behind a barrier so they really overlap; re-raise the first error."""
    barrier = threading.Barrier(count)
    results: list[T | None] = [None] * count
    errors: list[BaseException] = []

    def run(slot: int) -> None:
        try:
            barrier.wait()
            results[slot] = fn(slot)
        except BaseException as exc:
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run, args=(slot,)) for slot in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return results
