"""Delivery's walls, read with `ast` like the engine's door (tests/test_import_graph.py): delivery/ imports
nothing of trainings/ (it is told what it needs, delivery/domain.py), and trainings/ reaches delivery only
through its door, `delivery.api`, and its tables, `delivery.models`; at module level or inside a function."""

from __future__ import annotations

import pytest

from tests import test_import_graph as graph

DELIVERY_DOOR = frozenset({"delivery", "delivery.api", "delivery.models"})


def _app(module: str) -> str:
    return module.split(".", 1)[0]


def test_delivery_imports_nothing_of_the_domain() -> None:
    wrong = sorted(
        f"{i.module}:{i.line} imports {i.target}"
        for i in graph._imports()
        if _app(i.module) == "delivery"
        and (
            _app(i.target) == "trainings"
            or (_app(i.target) == "reminders" and i.target not in graph.ENGINE_DOOR)
        )
    )
    assert wrong == []  # the engine, like every app, only through reminders.api


def test_the_domain_uses_delivery_only_through_its_door() -> None:
    through_the_wall = sorted(
        f"{i.module}:{i.line} imports {i.target}"
        for i in graph._imports()
        if _app(i.module) == "trainings" and _app(i.target) == "delivery" and i.target not in DELIVERY_DOOR
    )
    assert through_the_wall == []


def test_the_engine_and_common_know_no_delivery() -> None:
    wrong = sorted(
        f"{i.module}:{i.line} imports {i.target}"
        for i in graph._imports()
        if _app(i.module) in ("reminders", "common") and _app(i.target) == "delivery"
    )
    assert wrong == []


def test_it_reads_delivery_and_sees_an_import_through_its_wall(monkeypatch: pytest.MonkeyPatch) -> None:
    """The checks themselves: the walk finds delivery's modules and edges, and a domain module naming a
    gateway module is past the door, a delivery module naming a domain one is found."""
    assert {
        "delivery.api",
        "delivery.models",
        "delivery.gateway.consumer",
        "delivery.channels.registry",
    } <= set(graph.MODULES)
    edges = {(i.module, i.target) for i in graph._imports()}
    assert ("trainings.reminding.publishing", "delivery.api") in edges
    assert ("delivery.gateway.sender", "delivery.domain") in edges
    node = graph._parse("from delivery.gateway.queue import push_queue_publisher")
    assert "delivery.gateway.queue" in set(graph._targets(node, "trainings.reminding.publishing", False))
    assert "delivery.gateway.queue" not in DELIVERY_DOOR
    node = graph._parse("from trainings.answers.links import answer_token")
    assert "trainings.answers.links" in set(graph._targets(node, "delivery.channels.email.message", False))
