"""Where candidates and served kernels run: this machine, or a device behind a TVM RPC tracker.

A worker for a device that cannot run a worker itself (a board, a phone) builds on its own
host and measures through the tracker: MetaSchedule's `RPCRunner` for the search, and an RPC
session for verifying and timing the kernels it publishes.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tuning.hardware.targets import device_for

DEVICE_TYPES = {"llvm": "cpu", "c": "cpu"}  # target kind -> TVM device type, where they differ
EVALUATOR = {"number": 3, "repeat": 1, "enable_cpu_cache_flush": False}
TIMING_MS = 100  # each timed run of a kernel lasts at least this long (search and verification)


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


@dataclass(frozen=True)
class Loaded:
    """A kernel library loaded where it runs, with the device to call it on."""

    module: Any
    device: Any


class Measurer:
    """Runs kernels for one target kind, locally or through an RPC tracker; every timed run
    lasts at least ``timing_ms`` (a worker's is its `service.settings.Settings.timing_ms`)."""

    def __init__(self, kind: str, rpc: RpcSpec | None = None, timing_ms: int = TIMING_MS) -> None:
        self.kind, self.rpc, self.timing_ms = kind, rpc, timing_ms

    def runner(self, timeout_sec: float = 60.0) -> Any:
        """The MetaSchedule runner measuring candidates (MetaSchedule's default evaluator)."""
        from tvm.s_tir.meta_schedule.runner import (
            EvaluatorConfig,
            LocalRunner,
            RPCConfig,
            RPCRunner,
        )

        evaluator = EvaluatorConfig(**EVALUATOR, min_repeat_ms=self.timing_ms)
        if self.rpc is None:
            return LocalRunner(timeout_sec=timeout_sec, evaluator_config=evaluator)
        config = RPCConfig(
            tracker_host=self.rpc.tracker_host,
            tracker_port=self.rpc.tracker_port,
            tracker_key=self.rpc.key,
            session_timeout_sec=self.rpc.session_timeout_s,
        )
        return RPCRunner(rpc_config=config, evaluator_config=evaluator, max_workers=1)

    @contextmanager
    def session(self) -> Iterator[_Session]:
        """A place to load libraries into, open for the duration of the block."""
        if self.rpc is None:
            yield _Session(self.kind, None)
            return
        from tvm import rpc

        tracker = rpc.connect_tracker(self.rpc.tracker_host, self.rpc.tracker_port)
        remote = tracker.request(
            self.rpc.key, priority=1, session_timeout=self.rpc.session_timeout_s
        )
        yield _Session(self.kind, remote)


class _Session:
    def __init__(self, kind: str, remote: Any) -> None:
        self.kind, self.remote = kind, remote

    def load(self, path: Path) -> Loaded:
        """Load a shared library here (uploading it first to a remote device)."""
        import tvm

        if self.remote is None:
            return Loaded(tvm.runtime.load_module(str(path)), device_for(self.kind))
        self.remote.upload(str(path))
        device_type = DEVICE_TYPES.get(self.kind, self.kind)
        return Loaded(self.remote.load_module(path.name), self.remote.device(device_type))
