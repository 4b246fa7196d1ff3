"""MetaSchedule's runner over a job's jailed kernel runner (`tuning.measure.kernel_jail`).

`LocalRunner` loads every candidate in a worker process of the tuning process's own uid and
reads its answers with `pickle`; a candidate built from a hostile trace would run there. This
runner hands each built library to the jail instead: checked (no constructors, no calls
beyond TVM's runtime and libm), copied where the jail sees it, timed there as MetaSchedule's
default evaluator times it (``number`` 3, ``repeat`` 1, at least ``timing_ms`` per repeat, on
random operands), then dropped. A library refused by the check, a kernel that crashes or
hangs the runner: that candidate fails (MetaSchedule records it as failed), the next one runs
in a fresh runner.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from tuning.checks.library_check import UnsafeLibrary
from tuning.measure.kernel_jail import KernelRunFailed


@functools.cache
def _classes() -> tuple[Any, Any]:
    from tvm.ir.utils import derived_object
    from tvm.s_tir.meta_schedule.runner import PyRunner, PyRunnerFuture, RunnerResult

    @derived_object
    class Measured(PyRunnerFuture):
        """A candidate measured already (the jail answers synchronously)."""

        def __init__(self, run_secs: list[float] | None, error: str | None) -> None:
            super().__init__()
            self.run_secs, self.error = run_secs, error

        def done(self) -> bool:
            return True

        def result(self) -> Any:
            return RunnerResult(self.run_secs, self.error)

    @derived_object
    class JailedRunner(PyRunner):
        """Each candidate timed in the job's jail."""

        def __init__(self, jail: Any, timing_ms: int, timeout_sec: float) -> None:
            super().__init__()
            self.jail, self.timing_ms, self.timeout_sec = jail, timing_ms, timeout_sec

        def run(self, runner_inputs: list[Any]) -> list[Any]:
            return [Measured(*self._measure(item)) for item in runner_inputs] or []

        def _measure(self, item: Any) -> tuple[list[float] | None, str | None]:
            specs = []
            for info in item.args_info:
                kind, dtype, shape = info.as_json()
                if kind != "TENSOR":
                    return None, f"JailedRunner: an argument of kind {kind!r}"
                specs.append(([int(x) for x in shape], str(dtype)))
            name = None
            try:
                name = self.jail.add_library(Path(str(item.artifact_path)))
                secs = self.jail.time(
                    name, specs, "main", number=3, repeat=1, min_repeat_ms=self.timing_ms
                )
                return secs, None
            except UnsafeLibrary as err:
                return None, f"JailedRunner: the library is refused: {err}"
            except KernelRunFailed as err:
                return None, f"JailedRunner: {err}"
            finally:
                if name is not None:
                    self.jail.forget(name)

    return JailedRunner, Measured


def jailed_runner(jail: Any, timing_ms: int, timeout_sec: float = 60.0) -> Any:
    """A MetaSchedule runner timing candidates in ``jail`` (a `KernelJail`)."""
    runner_class, _ = _classes()
    jail.timeout_s = timeout_sec
    return runner_class(jail, timing_ms, timeout_sec)
