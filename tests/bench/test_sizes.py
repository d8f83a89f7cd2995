"""The benchmark's size table: one (quick, full) row per size a scenario reads."""

from __future__ import annotations

import dataclasses

import pytest

from bench.harness import _SIZES, Sizes


def test_it_has_one_row_per_size() -> None:
    assert sorted(_SIZES) == sorted(f.name for f in dataclasses.fields(Sizes))


@pytest.mark.parametrize("quick", [True, False])
def test_it_builds_each_run_from_its_column(quick: bool) -> None:
    sizes = Sizes.for_run(quick)
    assert sizes.dispatch_backlog == (20_000 if quick else 100_000)
