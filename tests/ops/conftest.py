from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.core.cache import caches


@pytest.fixture(autouse=True)
def _empty_throttle_counters() -> Iterator[None]:
    caches["throttle"].clear()
    yield
    caches["throttle"].clear()
