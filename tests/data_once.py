"""Data a test module builds once and its tests share: pytest's counterpart of Django's `setUpTestData`.

The data is written inside an outer transaction that is rolled back when the module's tests are done; each
test's own transaction (pytest-django's `db`) is a savepoint inside it, so whatever a test writes is gone
before the next one starts, and the next one sees the shared data as it was built. Tests using it must not
be transactional (`transactional_db` would flush the shared data) and get a deep copy of the objects, as
`setUpTestData`'s tests do, so an instance one test changes in memory is not the next test's.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from django.db import transaction

T = TypeVar("T")


@contextmanager
def built_once(django_db_blocker: Any, build: Callable[[], T]) -> Iterator[T]:
    """`build()`'s result, written in a transaction rolled back when the block ends."""
    with django_db_blocker.unblock(), transaction.atomic():
        yield build()
        transaction.set_rollback(True)


def fresh_copy(shared: T) -> T:
    """A test's own copy of the shared objects (model instances deep-copy without a query)."""
    return copy.deepcopy(shared)
