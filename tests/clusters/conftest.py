"""The cluster tier's fixtures: a private 3-node RabbitMQ cluster for the whole session (tests/clusters/
rabbit_cluster.py), started by the first test that asks for it and removed at the end of the run."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.clusters.rabbit_cluster import RabbitCluster, rabbitmq_installed
from tests.faults.conftest import workers  # noqa: F401 - the fault suite's worker processes
from tests.trainings.seeded import rules  # noqa: F401 - autouse: Seed 000's rules in every test


@pytest.fixture(scope="session")
def rabbit_cluster() -> Iterator[RabbitCluster]:
    if not rabbitmq_installed():
        pytest.skip("RabbitMQ is not installed here (.ci/run installs it)")
    cluster = RabbitCluster()
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()
