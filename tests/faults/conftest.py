"""Fixtures of the fault suite (its results table is tests/fault_table.py)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.faults import harness, pg_pair


@pytest.fixture
def fault_queue() -> Iterator[str]:
    name = f"test.faults.{uuid.uuid4().hex[:12]}"
    yield name
    harness.delete_queue(name)


@pytest.fixture
def workers(tmp_path: Path, transactional_db: None) -> Iterator[Callable[..., harness.WorkerProcess]]:
    """Make worker processes; every one still running is killed at teardown, before the database flush."""
    made: list[harness.WorkerProcess] = []

    def make(name: str, *, phase_delay: float = 0.0, **env: str) -> harness.WorkerProcess:
        worker = harness.WorkerProcess(name=name, workdir=tmp_path, env=env, phase_delay=phase_delay)
        made.append(worker)
        return worker

    yield make
    for worker in made:
        worker.stop()


@pytest.fixture(scope="session")
def pg_template() -> Iterator[pg_pair.PgTemplate]:
    """A migrated data directory the scenarios' own PostgreSQL clusters are copied from (once per test
    process): the cluster scenarios never touch the machine's shared PostgreSQL."""
    if not pg_pair.available():
        pytest.skip(f"needs root and PostgreSQL's binaries in {pg_pair.PG_BIN}")
    template = pg_pair.PgTemplate()
    yield template
    template.remove()
