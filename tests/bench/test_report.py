"""The benchmark's table says pass or SHORT per target and never hides a skipped section; its database is
always its own, on the server the caller named."""

from __future__ import annotations

import pytest

from bench.harness import database_url_named, quantile
from bench.report import RoundRatios, Row, Section, render_table


def test_it_marks_each_target_pass_or_short() -> None:
    section = Section(
        "dispatch",
        rows=[
            Row("fast enough", 6000.0, 8000.0, "raw", "occ/s", 0.75, "of raw", "≥ 0.60x", True),
            Row("too slow", 3000.0, 8000.0, "raw", "occ/s", 0.375, "of raw", "≥ 0.60x", False),
            Row("informative", 1.0, unit="s"),
        ],
    )
    lines = render_table([section]).splitlines()
    assert "pass" in next(line for line in lines if "fast enough" in line)
    assert "SHORT" in next(line for line in lines if "too slow" in line)
    informative = next(line for line in lines if "informative" in line)
    assert "pass" not in informative and "SHORT" not in informative


def test_it_prints_a_skipped_section_with_its_reason() -> None:
    table = render_table([Section("trainings", skipped="trainings app not present")])
    assert "skipped: trainings app not present" in table


def test_it_keeps_the_server_and_replaces_only_the_database_name() -> None:
    url = database_url_named("postgres://postgres@127.0.0.1:5432/h_bench?sslmode=disable", "bench_reminders")
    assert url == "postgres://postgres@127.0.0.1:5432/bench_reminders?sslmode=disable"


def test_it_takes_quantiles_from_sorted_values() -> None:
    values = [float(i) for i in range(101)]
    assert quantile(values, 0.5) == 50.0
    assert quantile(values, 0.99) == 99.0
    assert quantile(values, 1.0) == 100.0


def test_a_ratio_over_rounds_is_their_median_so_one_slow_round_does_not_decide_it() -> None:
    ratios = RoundRatios((0.85, 0.87, 0.56, 1.00))  # 2b's rounds on a busy machine: one slow round
    assert ratios.median == pytest.approx(0.86)
    assert "spread 0.56 to 1.00" in ratios.describe()
    assert RoundRatios((1.03, 1.05, 0.6)).median == 1.03
