"""The bandwidth the workers measure (`tuning.hardware.bandwidth`) agrees with an independent
measurement: a C loop (tests/data/stream_bw.c, compiled here at -O3 for this CPU) streaming the
same slices on the same threads, in cache, in the shared last-level cache and in memory; and a
roofline is the longer of a kernel's compute time and its memory time."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.tuning.fresh_process import measured_in_fresh_process
from tuning.hardware.bandwidth import LLC_GAIN, llc_slice_bytes
from tuning.hardware.host import physical_cores
from tuning.hardware.roofline import Bandwidth, roofline_seconds, share_of_roofline
from tuning.hardware.targets import resolve_target

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "tests" / "data" / "stream_bw.c"
ROUNDS = 6  # at most: interleaved rounds are measured while the best of both sides disagree


def _agree(
    tvm_runs: list[dict[str, float]],
    c_cache: list[float],
    c_memory: list[float],
    c_llc: list[float],
) -> bool:
    """The best of the runs so far agree with the C loop's at every level measured: cache,
    memory, and the shared L3 where both measured it."""
    pairs = [(max(r["cache_gbps"] for r in tvm_runs), max(c_cache)),
             (max(r["memory_gbps"] for r in tvm_runs), max(c_memory))]  # fmt: skip
    llc = [r["llc_gbps"] for r in tvm_runs if r["llc_gbps"]]
    if llc and c_llc:
        pairs.append((max(llc), max(c_llc)))
    return all(0.75 * c <= tvm <= 1.33 * c for tvm, c in pairs)


def test_the_measured_bandwidth_agrees_with_an_independent_stream_loop(tmp_path: Path) -> None:
    binary = tmp_path / "stream_bw"
    built = subprocess.run(
        ["cc", "-O3", "-march=native", "-pthread", str(SOURCE), "-o", str(binary)],
        capture_output=True, text=True,
    )  # fmt: skip
    assert built.returncode == 0, built.stderr
    threads = physical_cores()
    canonical = {**resolve_target("host").canonical, "num-cores": threads}
    tvm_runs: list[dict[str, float]] = []
    c_cache: list[float] = []
    c_llc: list[float] = []
    c_memory: list[float] = []
    # Interleaved rounds: a slow moment of the machine hits both. On a VM, bandwidth swings
    # for seconds at a time (a CI run saw 45 against 86 GB/s in memory, a run beside other
    # work 130 against 468 in cache), so more rounds (up to ROUNDS) are measured while the
    # best of both sides do not agree yet.
    for round_ in range(ROUNDS):
        if round_ >= 2 and _agree(tvm_runs, c_cache, c_memory, c_llc):
            break
        tvm_runs.append(
            measured_in_fresh_process(
                "tuning.hardware.bandwidth:target_bandwidth", canonical, threads
            )
        )
        run = tvm_runs[-1]
        levels = [(c_cache, run["cache_bytes"] // (2 * threads), 400), (c_memory, 64 << 20, 2)]
        if run["llc_bytes"]:
            levels.append((c_llc, run["llc_bytes"] // (2 * threads), 20))
        for results, slice_bytes, reps in levels:
            out = subprocess.run([str(binary), str(threads), str(slice_bytes), str(reps)],
                                 capture_output=True, text=True, check=True).stdout  # fmt: skip
            results.append(float(out))
    cache = max(run["cache_gbps"] for run in tvm_runs)
    memory = max(run["memory_gbps"] for run in tvm_runs)
    assert 0.75 * max(c_cache) <= cache <= 1.33 * max(c_cache), (tvm_runs, c_cache)
    assert 0.75 * max(c_memory) <= memory <= 1.33 * max(c_memory), (tvm_runs, c_memory)
    assert cache > memory  # levels told apart
    # A shared L3 larger than the cores' slices: measured in half of it (at most LLC_SLICE a
    # thread and array), and told apart; where it is not, the C loop agrees it is no faster.
    llc_slice = llc_slice_bytes(threads)
    if llc_slice <= tvm_runs[0]["cache_bytes"] // threads:
        assert {run["llc_bytes"] for run in tvm_runs} == {None}
    elif any(run["llc_bytes"] for run in tvm_runs):
        assert {run["llc_bytes"] for run in tvm_runs} - {None} == {2 * llc_slice * threads}
        llc = max(run["llc_gbps"] or 0.0 for run in tvm_runs)
        assert 0.75 * max(c_llc) <= llc <= 1.33 * max(c_llc), (tvm_runs, c_llc)
        assert cache > llc >= LLC_GAIN * memory
    else:
        c_at_llc = subprocess.run([str(binary), str(threads), str(llc_slice), "20"],
                                  capture_output=True, text=True, check=True).stdout  # fmt: skip
        assert float(c_at_llc) < 1.33 * LLC_GAIN * max(c_memory), (tvm_runs, c_at_llc)


@pytest.mark.parametrize(
    ("flop", "nbytes", "expected_us"),
    [
        (2 * 128 * 768 * 768, 4 * (128 * 768 * 2 + 768 * 768), 300.0),  # dense: compute-bound
        (5 * 12 * 128 * 128, 8 * 12 * 128 * 128, 15.72864),  # softmax: in cache
        (1e6, 400e6, 20000.0),  # a 400 MB copy: in memory
        (1e6, 8e6, 160.0),  # a 4 MB max pool: past the cores' caches, in the shared one
    ],
)
def test_a_roofline_is_the_longer_of_compute_and_memory(
    flop: float, nbytes: float, expected_us: float
) -> None:
    bandwidth = Bandwidth(100.0, 20.0, cache_bytes=4 << 20, llc_gbps=50.0, llc_bytes=16 << 20)
    assert roofline_seconds(flop, nbytes, 503.316, bandwidth) * 1e6 == pytest.approx(
        expected_us, rel=1e-3
    )
    assert roofline_seconds(flop, nbytes, None, None) is None
    assert roofline_seconds(flop, None, 503.316, None) == pytest.approx(flop / 503.316e9)
    roof = expected_us * 1e-6
    assert share_of_roofline(2 * roof, roof) == pytest.approx(0.5)
    assert share_of_roofline(roof / 2, roof) == 1.0  # never above: the figures were low


def test_without_a_last_level_cache_past_the_cores_caches_is_memory() -> None:
    two_levels = Bandwidth(cache_gbps=100.0, memory_gbps=20.0, cache_bytes=4 << 20)
    assert two_levels.for_bytes(4 << 20) == 100.0
    assert two_levels.for_bytes(8e6) == 20.0
    three = Bandwidth(100.0, 20.0, cache_bytes=4 << 20, llc_gbps=50.0, llc_bytes=16 << 20)
    assert [three.for_bytes(n) for n in (4 << 20, 16 << 20, (16 << 20) + 1)] == [100, 50, 20]
