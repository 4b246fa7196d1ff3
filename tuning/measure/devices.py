"""Where candidates and served kernels run: a jailed runner on this machine, or a device behind
a TVM RPC tracker. Never in the worker's own process.

A compiled candidate runs code when it is loaded and called, and its trace may come from a
user (an import, a stored record, a neighbour's schedule refitted). Locally, every library is
checked (`tuning.checks.library_check`) and then loaded, run and timed by the job's jailed
runner (`tuning.measure.kernel_jail`): MetaSchedule's measurements through `runner`, the
verification and timing of the published candidates through `session`. A worker for a device
that cannot run a worker itself (a board, a phone) builds on its own host and measures through
the tracker instead: MetaSchedule's `RPCRunner` for the search, an RPC session to verify and
time what it publishes; the device loads the kernels, not the worker.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from tuning.measure.jailed_runner import jailed_runner
from tuning.measure.kernel_jail import KernelJail, PackedInput
from tuning.measure.timing import Timing, run_module, time_module
from tuning.publish.packing import PACKED_ENTRY, PackedParam

DEVICE_TYPES = {"llvm": "cpu", "c": "cpu"}  # target kind -> TVM device type, where they differ
EVALUATOR = {"number": 3, "repeat": 1, "enable_cpu_cache_flush": False}
TIMING_MS = 100  # each timed run of a kernel lasts at least this long (search and verification)
TIMED_REPEATS = 5  # timed runs of a kernel the worker publishes (their median is its latency)


@dataclass(frozen=True)
class RpcSpec:
    """A device key on a TVM RPC tracker."""

    tracker_host: str
    tracker_port: int
    key: str
    session_timeout_s: int = 120

    @classmethod
    def parse(cls, tracker: str, key: str) -> RpcSpec:
        """From ``HOST:PORT`` and a key; ValueError with a readable reason otherwise."""
        host, sep, port = tracker.rpartition(":")
        if not sep or not host or not port.isdigit():
            raise ValueError(f"--rpc-tracker must be HOST:PORT, not {tracker!r}")
        if not key:
            raise ValueError("--rpc-key must name the device key the RPC servers registered")
        return cls(host, int(port), key)

    def as_json(self) -> dict[str, Any]:
        """What the worker registry shows."""
        return {"tracker": f"{self.tracker_host}:{self.tracker_port}", "key": self.key}


class KernelSession(Protocol):
    """Somewhere a compiled library is loaded, run and timed (`Measurer.session`)."""

    def load(self, path: Path) -> Any:
        """Check and load the library at ``path``; a handle for `run` and `time`."""
        ...

    def run(
        self,
        kernel: Any,
        inputs: list[np.ndarray],
        out_shape: list[int],
        out_dtype: str,
        packed: Sequence[PackedParam] = (),
    ) -> np.ndarray:
        """The output on ``inputs`` (weights packed by their ``pack_<i>``, then
        ``main_packed``, when ``packed`` lists them)."""
        ...

    def time(self, kernel: Any, specs: list[tuple[list[int], str]], entry: str = "main") -> Timing:
        """``entry`` timed on random operands of ``specs`` (median of `TIMED_REPEATS` runs)."""
        ...


class Measurer:
    """Runs kernels for one target kind, each timed run lasting at least ``timing_ms``: in a
    jailed runner of ``threads`` threads (its files under ``work_dir``), or through an RPC
    tracker. The jail is started on first use and stopped by `close` (or the ``with`` block)."""

    def __init__(
        self,
        kind: str,
        rpc: RpcSpec | None = None,
        timing_ms: int = TIMING_MS,
        work_dir: Path | None = None,
        threads: int = 1,
    ) -> None:
        self.kind, self.rpc, self.timing_ms, self.threads = kind, rpc, timing_ms, threads
        self._temp: tempfile.TemporaryDirectory[str] | None = None
        if work_dir is None and rpc is None:
            self._temp = tempfile.TemporaryDirectory(prefix="tunehub-kernels-")
            work_dir = Path(self._temp.name)
        self.work_dir = work_dir
        self._jail: Any = None

    def __enter__(self) -> Measurer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def jail(self) -> Any:
        """The jailed runner (`tuning.measure.kernel_jail.KernelJail`) of local measurements."""

        if self._jail is None:
            assert self.work_dir is not None
            self._jail = KernelJail(self.kind, self.work_dir / "kernels", self.threads)
        return self._jail

    def close(self) -> None:
        """Stop the jailed runner and remove its files."""
        if self._jail is not None:
            self._jail.close()
            self._jail = None
        if self._temp is not None:
            self._temp.cleanup()
            self._temp = None

    def runner(self, timeout_sec: float = 60.0) -> Any:
        """The MetaSchedule runner measuring candidates (MetaSchedule's default evaluator)."""
        from tvm.s_tir.meta_schedule.runner import EvaluatorConfig, RPCConfig, RPCRunner

        if self.rpc is None:
            return jailed_runner(self.jail(), self.timing_ms, timeout_sec)
        evaluator = EvaluatorConfig(**EVALUATOR, min_repeat_ms=self.timing_ms)
        config = RPCConfig(
            tracker_host=self.rpc.tracker_host,
            tracker_port=self.rpc.tracker_port,
            tracker_key=self.rpc.key,
            session_timeout_sec=self.rpc.session_timeout_s,
        )
        return RPCRunner(rpc_config=config, evaluator_config=evaluator, max_workers=1)

    @contextmanager
    def session(self) -> Iterator[KernelSession]:
        """A place to load libraries into, open for the duration of the block."""
        if self.rpc is None:
            yield _JailSession(self.jail(), self.timing_ms)
            return
        from tvm import rpc

        tracker = rpc.connect_tracker(self.rpc.tracker_host, self.rpc.tracker_port)
        remote = tracker.request(
            self.rpc.key, priority=1, session_timeout=self.rpc.session_timeout_s
        )
        yield _RpcSession(self.kind, remote, self.timing_ms)


class _JailSession:
    """Kernels loaded, run and timed by the measurer's jailed runner."""

    def __init__(self, jail: Any, timing_ms: int) -> None:
        self.jail, self.timing_ms = jail, timing_ms
        self._arrays: dict[int, tuple[np.ndarray, str]] = {}  # id -> (the array, its file)

    def load(self, path: Path) -> str:
        return str(self.jail.add_library(path))

    def _array(self, array: np.ndarray) -> str:
        known = self._arrays.get(id(array))
        if known is None or known[0] is not array:
            known = (array, self.jail.add_array(array))
            self._arrays[id(array)] = known
        return known[1]

    def run(
        self,
        kernel: Any,
        inputs: list[np.ndarray],
        out_shape: list[int],
        out_dtype: str,
        packed: Sequence[PackedParam] = (),
    ) -> np.ndarray:

        return self.jail.run(
            kernel,
            [self._array(x) for x in inputs],
            out_shape,
            out_dtype,
            [PackedInput(p.index, p.function, p.packed_shape, p.dtype) for p in packed],
            PACKED_ENTRY if packed else "main",
        )

    def time(self, kernel: Any, specs: list[tuple[list[int], str]], entry: str = "main") -> Timing:
        secs = self.jail.time(
            kernel, specs, entry, number=1, repeat=TIMED_REPEATS, min_repeat_ms=self.timing_ms
        )
        runs = [x * 1e6 for x in secs]
        return Timing(median_us=float(np.median(runs)), runs_us=runs)


class _RpcSession:
    """Kernels uploaded to, loaded and run on a device behind an RPC tracker."""

    def __init__(self, kind: str, remote: Any, timing_ms: int) -> None:
        self.kind, self.remote, self.timing_ms = kind, remote, timing_ms

    def load(self, path: Path) -> tuple[Any, Any]:
        self.remote.upload(str(path))
        device_type = DEVICE_TYPES.get(self.kind, self.kind)
        return self.remote.load_module(path.name), self.remote.device(device_type)

    def run(
        self,
        kernel: Any,
        inputs: list[np.ndarray],
        out_shape: list[int],
        out_dtype: str,
        packed: Sequence[PackedParam] = (),
    ) -> np.ndarray:
        module, device = kernel
        return run_module(module, device, inputs, out_shape, out_dtype, packed)

    def time(self, kernel: Any, specs: list[tuple[list[int], str]], entry: str = "main") -> Timing:
        module, device = kernel
        return time_module(
            module, device, specs, repeat=TIMED_REPEATS, min_repeat_ms=self.timing_ms, entry=entry
        )
