"""Compiled kernels are loaded and run only in a jail: one long-lived jailed process per job
(`tuning.measure.kernel_child`) that the worker hands libraries, inputs and requests to.

A candidate's library comes from a trace (the search's, a stored record's, an import's, a
neighbour's) applied to a workload (the catalog's, or a user's function); its code runs when it
is loaded and called. So the worker never loads one itself: `KernelJail` copies each library
(checked by `tuning.checks.library_check` first) and each input array into a directory of
the job's that the jail sees read-only, and the jailed runner loads and runs it there, as an
unprivileged uid of its own with no network, no writable file system and bounded memory.

Contract: requests are answered in order, each within ``timeout_s`` (a kernel that hangs or
crashes the runner fails that request with `KernelRunFailed`; the runner is restarted for the
next one). Nothing the runner answers is trusted beyond its shape: an output must have exactly
the bytes its shape and dtype need, timings must be finite positive numbers. Where isolation
cannot be built, `SandboxUnavailable` is raised and nothing is loaded.
"""

from __future__ import annotations

import base64
import contextlib
import itertools
import json
import logging
import math
import os
import selectors
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tuning.catalog.dtypes import BF16_SUFFIX, BFLOAT16, numpy_dtype
from tuning.checks.library_check import check_library
from tuning.jail.cgroups import kill_uid, make_cgroups, remove_cgroups
from tuning.jail.isolated import (
    FRAME,
    SandboxFailed,
    SandboxUnavailable,
    unavailable_reason,
)
from tuning.jail.spawn import Limits, jail_command, new_uid, start_jail

log = logging.getLogger("tunehub.sandbox")
START_TIMEOUT_S = 120.0  # the runner imports TVM first (seconds on a loaded 2-core machine)
MAX_ANSWER_BYTES = 1 << 30


class KernelRunFailed(SandboxFailed):
    """A request the jailed runner did not answer (crash, hang, protocol) or refused."""


@dataclass(frozen=True)
class PackedInput:
    """A weight the kernel reads packed: ``function`` packs operand ``index`` first."""

    index: int
    function: str
    packed_shape: list[int]
    dtype: str


def kernel_limits(threads: int, gpu: bool = False) -> Limits:
    """What a job's runner may use: its kernels' threads, memory for their operands, no file
    writes, and CPU time for hours of measurement (a hung kernel is the request timeout's)."""
    return Limits(
        cpu_seconds=7 * 24 * 3600,
        wall_seconds=float("inf"),
        address_space=1 << 40,  # virtual; what is resident is the memory cgroup's to bound
        tree_memory=16 << 30,
        open_files=1024,
        processes=max(64, 8 * threads),  # threads count as processes for the uid
        threads=threads,
        idle_seconds=0.0,  # it waits between a job's batches
        gpu=gpu,
    )


class KernelJail:
    """One job's jailed kernel runner over ``directory`` (created, emptied on `close`).
    Started on first use; use as a context manager or call `close`."""

    def __init__(self, kind: str, directory: Path, threads: int, timeout_s: float = 60.0) -> None:
        self.kind, self.timeout_s = kind, timeout_s
        self.directory = directory.resolve()
        self.limits = kernel_limits(threads, gpu=kind == "cuda")
        self._names = itertools.count()
        self._proc: subprocess.Popen[bytes] | None = None
        self._uid: int | None = None
        self._cgroups: list[Path] = []
        self._stderr = bytearray()
        self._buffer = bytearray()

    def __enter__(self) -> KernelJail:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ----------------------------------------------------------------- inputs
    def add_library(self, path: Path) -> str:
        """Check the library at ``path`` and put a copy where the runner sees it; its name
        there. `tuning.checks.library_check.UnsafeLibrary` when it is refused."""
        check_library(path)
        name = f"k{next(self._names)}.so"
        self.directory.mkdir(mode=0o755, exist_ok=True)
        shutil.copyfile(path, self.directory / name)
        (self.directory / name).chmod(0o644)
        return name

    def add_array(self, array: np.ndarray) -> str:
        """An input array as a ``.npy`` file the runner reads; its name there. A bfloat16
        array (ml_dtypes') travels as its uint16 bits in a ``.bf16.npy`` file: ``.npy`` has no
        bfloat16 and would hand back raw void records."""
        bits = array.dtype == numpy_dtype(BFLOAT16)
        name = f"a{next(self._names)}{BF16_SUFFIX if bits else '.npy'}"
        self.directory.mkdir(mode=0o755, exist_ok=True)
        # order="C", not ascontiguousarray: that makes a 0-d array (a scalar operand) 1-d.
        stored = np.asarray(array, order="C")
        np.save(self.directory / name, stored.view(np.uint16) if bits else stored,
                allow_pickle=False)  # fmt: skip
        (self.directory / name).chmod(0o644)
        return name

    def forget(self, name: str) -> None:
        """Drop a library (or array) from the runner and the directory."""
        if name.endswith(".so") and self._proc is not None:
            with contextlib.suppress(KernelRunFailed):
                self._ask({"op": "forget", "library": name}, self.timeout_s)
        (self.directory / name).unlink(missing_ok=True)

    # ---------------------------------------------------------------- requests
    def time(
        self,
        library: str,
        args: Sequence[tuple[Sequence[int], str]],
        entry: str = "main",
        number: int = 1,
        repeat: int = 1,
        min_repeat_ms: int = 0,
    ) -> list[float]:
        """Seconds per run of ``entry`` on random operands, one per repeat."""
        answer = self._ask(
            {"op": "time", "library": library, "entry": entry,
             "args": [[list(map(int, shape)), str(dtype)] for shape, dtype in args],
             "number": number, "repeat": repeat, "min_repeat_ms": min_repeat_ms},
            self.timeout_s + repeat * (min_repeat_ms / 1e3) * 2,
        )  # fmt: skip
        secs = answer.get("run_secs")
        if not (isinstance(secs, list) and len(secs) == repeat):
            raise KernelRunFailed("the kernel runner answered out of protocol")
        if not all(type(x) is float and math.isfinite(x) and x > 0 for x in secs):
            raise KernelRunFailed("the kernel runner answered out of protocol")
        return secs

    def run(
        self,
        library: str,
        inputs: Sequence[str],
        out_shape: Sequence[int],
        out_dtype: str,
        packed: Sequence[PackedInput] = (),
        entry: str = "main",
    ) -> np.ndarray:
        """The output of ``entry`` on the ``inputs`` arrays (weights through ``packed``)."""
        answer = self._ask(
            {"op": "run", "library": library, "entry": entry, "inputs": list(inputs),
             "packed": [vars(p) for p in packed], "out": [list(map(int, out_shape)), out_dtype]},
            self.timeout_s,
        )  # fmt: skip
        encoded = answer.get("output")
        dtype = numpy_dtype(out_dtype)
        expected = math.prod(int(x) for x in out_shape) * dtype.itemsize
        if not isinstance(encoded, str) or len(encoded) > 4 * (expected // 3 + 1) + 4:
            raise KernelRunFailed("the kernel runner answered out of protocol")
        raw = base64.b64decode(encoded, validate=True)
        if len(raw) != expected:
            raise KernelRunFailed("the kernel runner's output has the wrong size")
        return np.frombuffer(raw, dtype=dtype).reshape(tuple(out_shape)).copy()

    # ----------------------------------------------------------------- process
    def close(self) -> None:
        """Stop the runner (if started) and remove the directory."""
        self._stop()
        shutil.rmtree(self.directory, ignore_errors=True)

    def _start(self) -> None:
        reason = unavailable_reason()
        if reason:
            raise SandboxUnavailable(f"isolation is unavailable: {reason}")
        self.directory.mkdir(mode=0o755, parents=True, exist_ok=True)
        os.chmod(self.directory, 0o755)
        self._uid = new_uid()
        self._cgroups = make_cgroups(self._uid, self.limits.tree_memory, self.limits.processes)
        command = jail_command(
            self._uid, self.limits, self._cgroups, program="tuning.measure.kernel_child",
            extra_paths=[self.directory],
        )  # fmt: skip
        self._proc = start_jail(command)
        self._stderr.clear()
        self._buffer.clear()
        threading.Thread(target=self._drain, args=(self._proc,), daemon=True).start()
        config = {"directory": str(self.directory), "kind": self.kind}
        try:
            self._send(json.dumps(config).encode() + b"\n", framed=False)
            ready = self._answer(START_TIMEOUT_S)
        except KernelRunFailed as err:
            if "tunehub-jail:" in self._stderr.decode(errors="replace"):
                raise SandboxUnavailable(f"isolation could not be built: {err}") from None
            raise
        if ready.get("ready") is not True:
            self._stop()
            raise KernelRunFailed("the kernel runner did not start")

    def _drain(self, proc: subprocess.Popen[bytes]) -> None:
        """Keep the last 64 KiB of what the runner writes to stderr (diagnostics only)."""
        assert proc.stderr is not None
        fd = proc.stderr.fileno()
        for chunk in iter(lambda: os.read(fd, 1 << 16), b""):
            self._stderr.extend(chunk)
            del self._stderr[: max(0, len(self._stderr) - (64 << 10))]
        proc.stderr.close()

    def _stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            for stream in (proc.stdin, proc.stdout):
                if stream is not None:
                    stream.close()
        if self._uid is not None:
            kill_uid(self._uid)
            self._uid = None
        remove_cgroups(self._cgroups)
        self._cgroups = []

    def _send(self, data: bytes, framed: bool = True) -> None:
        assert self._proc is not None and self._proc.stdin is not None
        try:
            self._proc.stdin.write(str(len(data)).encode() + b"\n" + data if framed else data)
            self._proc.stdin.flush()
        except (BrokenPipeError, OSError):
            raise KernelRunFailed(self._died("stopped reading requests")) from None

    def _ask(self, request: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        if self._proc is None:
            self._start()
        self._send(json.dumps(request).encode())
        answer = self._answer(timeout_s)
        if answer.get("ok") is not True:
            error = answer.get("error")
            raise KernelRunFailed(error[:2000] if isinstance(error, str) else "refused")
        return answer

    def _answer(self, timeout_s: float) -> dict[str, Any]:
        """The next answer frame; on a timeout, death or protocol error the runner is
        stopped (the next request starts a new one) and `KernelRunFailed` raised."""
        assert self._proc is not None and self._proc.stdout is not None
        deadline = time.monotonic() + timeout_s
        stdout = self._proc.stdout
        with selectors.DefaultSelector() as selector:
            selector.register(stdout, selectors.EVENT_READ)
            while True:
                frame = self._frame()
                if frame is not None:
                    return frame
                left = deadline - time.monotonic()
                if left <= 0:
                    self._stop()
                    raise KernelRunFailed(f"no answer within {timeout_s:g} s: the kernel hangs")
                if selector.select(timeout=min(left, 1.0)):
                    chunk = os.read(stdout.fileno(), 1 << 20)
                    if not chunk:
                        raise KernelRunFailed(self._died("died"))
                    self._buffer.extend(chunk)
                    if len(self._buffer) > MAX_ANSWER_BYTES:
                        self._stop()
                        raise KernelRunFailed("the kernel runner answered too much")

    def _frame(self) -> dict[str, Any] | None:
        if b"\n" not in self._buffer:
            if self._buffer and not FRAME.startswith(bytes(self._buffer[: len(FRAME)])):
                self._stop()
                raise KernelRunFailed("the kernel runner answered out of protocol")
            return None
        header, _, rest = bytes(self._buffer).partition(b"\n")
        try:
            if not header.startswith(FRAME):
                raise ValueError(header[:40])
            length = int(header[len(FRAME) :])
        except ValueError:
            self._stop()
            raise KernelRunFailed("the kernel runner answered out of protocol") from None
        if len(rest) < length:
            return None
        del self._buffer[: len(header) + 1 + length]
        try:
            answer = json.loads(rest[:length])
        except (ValueError, RecursionError):
            answer = None
        if not isinstance(answer, dict):
            self._stop()
            raise KernelRunFailed("the kernel runner answered out of protocol")
        return answer

    def _died(self, what: str) -> str:
        code = None
        if self._proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                code = self._proc.wait(timeout=5)
        self._stop()
        tail = self._stderr.decode(errors="replace").strip().splitlines()[-1:]
        detail = f" (status {code}{': ' + tail[0][:300] if tail else ''})"
        return f"the kernel runner {what}{detail}: a kernel crashed it"
