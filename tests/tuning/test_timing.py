"""A published latency is a quiet one: runs that spread more than 10% of their median (another
process held the cores) are timed again, and the quietest timing is kept with its spread."""

from __future__ import annotations

from tuning.measure.timing import NOISY_SPREAD, QUIET_ATTEMPTS, Timing, quiet_timing


def _timings(*runs: list[float]) -> list[Timing]:
    return [Timing(median_us=sorted(r)[len(r) // 2], runs_us=r) for r in runs]


def test_a_quiet_timing_is_kept_at_once() -> None:
    given = _timings([10.0, 10.1, 10.2, 10.0, 10.1], [99.0] * 5)
    kept = quiet_timing(lambda: given.pop(0))
    assert kept.median_us == 10.1 and kept.spread < NOISY_SPREAD and len(given) == 1


def test_a_disturbed_timing_is_measured_again_and_the_quietest_kept() -> None:
    given = _timings([10.0, 21.0, 19.0, 20.0, 10.5], [10.0, 10.1, 13.0, 10.2, 10.0], [9.0] * 5)
    calls = []

    def measure() -> Timing:
        calls.append(1)
        return given.pop(0)

    kept = quiet_timing(measure)
    assert len(calls) == QUIET_ATTEMPTS  # the second still spread 30%: a third was taken
    assert kept.median_us == 9.0 and kept.spread == 0.0


def test_the_spread_is_the_range_over_the_median() -> None:
    (timing,) = _timings([8.0, 10.0, 12.0])
    assert timing.spread == (12.0 - 8.0) / 10.0
