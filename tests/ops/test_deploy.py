"""deploy/: the alert rules and the Grafana dashboard name only metrics the project exports, and the rules
behave (promtool's own checker and unit tests, when Debian's `prometheus` package provides promtool)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from prometheus_client.metrics import MetricWrapperBase

from delivery.gateway import metrics as push_metrics
from reminders.ops import metrics
from reminders.ops.db_gauges import DatabaseCollector

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
RULES = DEPLOY / "prometheus" / "alerts.yml"
NAME = re.compile(r"\b((?:reminders|trainings)_[a-z_]+)\b")
SUFFIXES = {"counter": ["_total"], "histogram": ["_bucket", "_sum", "_count"], "gauge": [""]}


@pytest.fixture
def exported(db: None) -> set[str]:
    """Every sample name /metrics can serve: the process metrics and the database gauges."""
    names: set[str] = set()
    modules = (metrics, push_metrics)  # the engine's and the pushes' (trainings_*)
    collectors = [v for m in modules for v in vars(m).values() if isinstance(v, MetricWrapperBase)]
    for collector in collectors:
        for family in collector.describe():
            names.update(family.name + suffix for suffix in SUFFIXES[family.type])
    names.update(family.name for family in DatabaseCollector().collect())
    return names


def _rules() -> list[dict[str, object]]:
    return [rule for group in yaml.safe_load(RULES.read_text())["groups"] for rule in group["rules"]]


def test_the_rules_cover_what_operators_are_paged_for() -> None:
    names = {rule["alert"] for rule in _rules()}
    assert {
        "RemindersLate", "RemindersBacklogGrowing", "RemindersNoScan", "RemindersFailuresRising",
        "PushGatewaySilent",
    } <= names  # fmt: skip
    late = next(rule for rule in _rules() if rule["alert"] == "RemindersLate")
    assert "histogram_quantile(0.99" in str(late["expr"]) and "> 60" in str(late["expr"])
    assert late["for"] == "5m"


def test_every_rule_expression_names_exported_metrics(exported: set[str]) -> None:
    for rule in _rules():
        used = set(NAME.findall(str(rule["expr"])))
        assert used, rule
        assert used <= exported, (rule["alert"], used - exported)


def test_every_dashboard_query_names_exported_metrics(exported: set[str]) -> None:
    dashboard = json.loads((DEPLOY / "grafana" / "reminders.json").read_text())
    queries = [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]
    assert len(queries) >= 8
    for query in queries:
        used = set(NAME.findall(query))
        assert used and used <= exported, (query, used - exported)


@pytest.mark.skipif(
    shutil.which("promtool") is None, reason="promtool (Debian package prometheus) not installed"
)
def test_promtool_accepts_the_rules_and_their_unit_tests_pass() -> None:
    check = subprocess.run(["promtool", "check", "rules", str(RULES)], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    unit = subprocess.run(
        ["promtool", "test", "rules", "alerts_test.yml"], cwd=RULES.parent, capture_output=True, text=True
    )
    assert unit.returncode == 0, unit.stdout + unit.stderr
