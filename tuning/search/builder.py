"""A MetaSchedule builder that does not time out on small machines.

MetaSchedule's `default_build` imports `tvm.s_tir.tensor_intrin` in every fresh popen worker
(~26 s on a 2-core machine, 20 s of it CUDA intrinsics), and `LocalBuilder` starts fresh workers for
every batch, so with the 30 s default timeout nearly every candidate fails once the machine is a
little loaded. The candidates arrive already scheduled and tensorized, so the import is not needed
to build them: `fast_build` does what `default_build` does minus that import (LLVM then builds a
candidate in 0.03-0.18 s).

Each candidate is linked into a shared library without start files (`checked_export`): the
job's jailed runner loads only libraries `tuning.checks.library_check` accepts.

`LocalBuilder` also starts its worker processes afresh for every batch (against a slow memory
leak of long-lived workers), and each one imports TVM before it builds anything: 2-4 s of every
batch on a 2-core machine, most of the cost of a small batch. `PooledBuilder` keeps its workers
for the whole search and replaces each after `WORKER_USES` builds instead.
"""

from __future__ import annotations

from typing import Any

from tuning.checks.library_check import export_library


def fast_build(mod: Any, target: Any, _params: Any = None) -> Any:
    """`default_build` without importing the tensor intrinsics (runs in a popen worker)."""
    from tvm.driver import build as tvm_build
    from tvm.s_tir.transform import RemoveWeightLayoutRewriteBlock

    mod = RemoveWeightLayoutRewriteBlock(skip_tensor_rewrite=True)(mod)
    return tvm_build(mod, target=target)


def checked_export(module: Any) -> str:
    """Link the built module into a shared library the jailed runner may load (no start
    files; checked by `tuning.checks.library_check`, else the candidate fails here); its
    path. MetaSchedule's `default_export` writes a tar of objects that `LocalRunner` links
    when it loads them."""
    import tempfile
    from pathlib import Path

    return str(export_library(module, Path(tempfile.mkdtemp()) / "candidate.so"))


WORKER_USES = 64  # builds before a worker process is replaced (LocalBuilder's leak)


def make_builder(max_workers: int, timeout_sec: float = 60.0) -> Any:
    """A builder using `fast_build` in worker processes kept across batches (`PooledBuilder`);
    call its ``shutdown()`` when the search ends."""
    from tvm.ir.utils import derived_object
    from tvm.s_tir.meta_schedule.builder import BuilderResult, PyBuilder
    from tvm.s_tir.meta_schedule.builder.local_builder import (
        _serialize_params,
        _worker_func,
    )
    from tvm.support.popen_pool import PopenPoolExecutor, StatusKind

    @derived_object
    class PooledBuilder(PyBuilder):
        """`LocalBuilder`'s build, on one pool of worker processes for every batch."""

        def __init__(self) -> None:
            super().__init__()
            self.pool = PopenPoolExecutor(
                max_workers=max_workers, timeout=timeout_sec, maximum_process_uses=WORKER_USES
            )

        def build(self, build_inputs: list[Any]) -> list[Any]:
            jobs = [
                (fast_build, checked_export, b.mod, b.target, _serialize_params(b.params))
                for b in build_inputs
            ]
            results = []
            for done in self.pool.map_with_error_catching(lambda x: _worker_func(*x), jobs):
                if done.status == StatusKind.COMPLETE:
                    results.append(BuilderResult(done.value, None))
                elif done.status == StatusKind.TIMEOUT:
                    message = f"PooledBuilder: Timeout, killed after {timeout_sec} seconds"
                    results.append(BuilderResult(None, message))
                else:
                    message = f"PooledBuilder: An exception occurred\n{done.value}"
                    results.append(BuilderResult(None, message))
            return results

        def shutdown(self) -> None:
            """Stop the worker processes."""
            self.pool.shutdown()

    return PooledBuilder()
