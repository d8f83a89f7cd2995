"""Scrape `/metrics` the way Prometheus does and read samples out of the text exposition."""

from __future__ import annotations

from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def scrape(client: Client | None = None, **headers: str) -> Samples:
    response = (client or Client()).get("/metrics", **headers)
    assert response.status_code == 200, response.content[:500]
    assert response["Content-Type"].startswith("text/plain; version=0.0.4")
    return parse(response.content.decode())


def parse(text: str) -> Samples:
    found: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return found


def value(samples: Samples, name: str, **labels: str) -> float:
    """One sample's value; 0 when the series does not exist yet (a counter never incremented)."""
    return samples.get((name, frozenset(labels.items())), 0.0)


def delta(before: Samples, after: Samples, name: str, **labels: str) -> float:
    return value(after, name, **labels) - value(before, name, **labels)
