"""Compiled kernels run only in a job's jailed runner: it answers what the kernel computes,
survives nothing a kernel does to it (a crash, a hang: that request fails, the next one gets a
fresh runner), refuses a library the check refuses, and a worker that cannot build the jail
does not start."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tuning.checks.library_check import UnsafeLibrary
from tuning.measure.kernel_jail import KernelJail, KernelRunFailed
from tuning.publish.verify import build_library

ROOT = Path(__file__).resolve().parents[2]


def _library(tmp_path: Path, func: Any, name: str) -> Path:
    import tvm

    return build_library(tvm.IRModule({"main": func}), tvm.target.Target("llvm"), tmp_path / name)


def _doubling() -> Any:
    from tvm.script import tirx as T

    @T.prim_func(s_tir=True)
    def double(a: T.Buffer((16,), "float32"), b: T.Buffer((16,), "float32")) -> None:
        for i in range(16):
            with T.sblock("B"):
                vi = T.axis.spatial(16, i)
                b[vi] = a[vi] * T.float32(2)

    return double


def _crashing() -> Any:
    """A kernel that stores far outside its buffer (what an unchecked index can do)."""
    from tvm.script import tirx as T

    @T.prim_func(s_tir=True)
    def crash(a: T.Buffer((16,), "float32"), b: T.Buffer((16,), "float32")) -> None:
        for i in range(16):
            with T.sblock("B"):
                vi = T.axis.spatial(16, i)
                b[vi + 2000000000] = a[vi]

    return crash


def _hanging() -> Any:
    """A kernel that runs for years."""
    from tvm.script import tirx as T

    @T.prim_func(s_tir=True)
    def hang(a: T.Buffer((16,), "float32"), b: T.Buffer((16,), "float32")) -> None:
        for i, j in T.grid(1 << 30, 1 << 30):
            with T.sblock("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                b[(vi + vj) % 16] = b[(vi * vj) % 16] + a[vj % 16]

    return hang


def test_a_kernel_runs_and_is_timed_in_the_jail(tmp_path: Path) -> None:
    library = _library(tmp_path, _doubling(), "double.so")
    a = np.arange(16, dtype="float32")
    with KernelJail("llvm", tmp_path / "kernels", threads=1) as jail:
        name = jail.add_library(library)
        out = jail.run(name, [jail.add_array(a)], [16], "float32")
        np.testing.assert_array_equal(out, a * 2)
        secs = jail.time(name, [([16], "float32")] * 2, repeat=3, min_repeat_ms=1)
        assert len(secs) == 3 and all(0 < s < 0.01 for s in secs)
    assert not (tmp_path / "kernels").exists()


def test_a_crash_or_a_hang_fails_its_request_and_the_next_one_runs(tmp_path: Path) -> None:
    good = _library(tmp_path, _doubling(), "double.so")
    a = np.ones(16, dtype="float32")
    with KernelJail("llvm", tmp_path / "kernels", threads=1, timeout_s=3) as jail:
        crash = jail.add_library(_library(tmp_path, _crashing(), "crash.so"))
        with pytest.raises(KernelRunFailed, match="died|crashed"):
            jail.run(crash, [jail.add_array(a)], [16], "float32")
        hang = jail.add_library(_library(tmp_path, _hanging(), "hang.so"))
        with pytest.raises(KernelRunFailed, match="no answer within 3 s"):
            jail.run(hang, [jail.add_array(a)], [16], "float32")
        name = jail.add_library(good)
        np.testing.assert_array_equal(jail.run(name, [jail.add_array(a)], [16], "float32"), a * 2)


def test_a_refused_library_is_never_handed_to_the_jail(tmp_path: Path) -> None:
    from tests.security.payloads import probe_library

    marker = tmp_path / "marker"
    with KernelJail("llvm", tmp_path / "kernels", threads=1) as jail:
        with pytest.raises(UnsafeLibrary):
            jail.add_library(probe_library(marker, tmp_path / "probe.so", ["-nostartfiles"]))
        assert list((tmp_path / "kernels").glob("*.so")) == []
    assert not marker.exists()


def test_a_worker_that_cannot_build_the_jail_does_not_start(tmp_path: Path) -> None:
    os.chmod(tmp_path, 0o777)
    done = subprocess.run(
        ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable, "-m",
         "service.entry.cli", "worker", "--no-supervise", "--data-dir", str(tmp_path / "data")],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert done.returncode != 0
    assert "kernels run only in a jail" in done.stderr, done.stderr
    assert not (tmp_path / "data").exists()  # refused before it touched the store
