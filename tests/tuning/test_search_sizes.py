"""How a search sizes its batches and its evolutionary population (no tuning)."""

from __future__ import annotations

from tuning.search.loop import batch_size, population_size


def test_batches_report_at_least_four_times_but_hold_eight_candidates() -> None:
    assert batch_size(16, 64) == 8  # small budgets: batches of 8
    assert batch_size(64, 64) == 16  # four reports per job
    assert batch_size(1000, 64) == 64  # never above num_trials_per_iter
    assert batch_size(3, 64) == 3  # never above the budget


def test_population_grows_with_the_batch_up_to_metaschedules_default() -> None:
    assert population_size(4) == 128
    assert population_size(1) == 64  # enough for the search's 50 fresh samples a round
    assert population_size(16) == population_size(batch_size(64, 64)) == 512
    assert population_size(64) == 512
