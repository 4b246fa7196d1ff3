"""Running a compiled model: seeded random inputs, the outputs and median time of an exported
Relax VM library, and how far two builds' outputs are apart.

Runs user-derived code: call inside the jail (`tuning.untrusted.model_requests`)."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tuning.hardware.bf16 import request_amx
from tuning.models.inputs import ModelInput

TIME_BUDGET_S = 3.0  # per library: the timed repeats are fitted into it (at least 3)
MAX_REPEATS = 50
# A tuned schedule reorders float reductions; beyond this it computes something else.
ATOL, RTOL = 1e-3, 1e-3
# A bf16 model's tuned build against its untuned one: a sum in another order may round an
# activation to the neighbouring bf16 value (2^-8 of it) before the next layer reads it.
BF16_ATOL, BF16_RTOL = 1e-2, 1.6e-2
FLOOR = 0.01  # see max_abs_error
# A reduced-precision model against float32 (issue 39): every output's cosine similarity, and
# the top class of every row of a classifier's logits, over this many seeded inputs.
MIN_COSINE = 0.999
AGREEMENT_INPUTS = 8
TIE = 1e-2  # two classes whose float32 logits are this close (of the row's largest |logit|),
# a few bf16 steps, are a tie


class OutputsDiffer(ValueError):
    """Two builds of a model disagree on the same inputs (the message says how)."""


@dataclass(frozen=True)
class Run:
    """A library's outputs on the inputs (numpy arrays, in order) and its median time."""

    outputs: list[Any]
    median_ms: float


def random_inputs(inputs: Sequence[ModelInput], seed: int = 0) -> list[Any]:
    """Seeded inputs: standard normal for floats, 0/1 for integers and booleans (an index
    input, a gather's, stays in range)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    arrays = []
    for item in inputs:
        if item.dtype.startswith("float"):
            arrays.append(rng.standard_normal(item.shape).astype(item.dtype))
        else:
            arrays.append(rng.integers(0, 2, item.shape).astype(item.dtype))
    return arrays


def run_library(path: Path, arrays: Sequence[Any], timed: bool = True) -> Run:
    """Load the exported library at ``path`` into a fresh VM on the CPU, run ``main`` on
    ``arrays`` once for its outputs, then time it (median of repeats, one call each; with
    ``timed`` false, not: ``median_ms`` is NaN)."""
    import tvm

    vm, device = _vm(path)
    args = [tvm.runtime.tensor(a, device) for a in arrays]
    outputs = _outputs(vm["main"](*args))
    if not timed:
        return Run(outputs, float("nan"))
    once = vm.time_evaluator("main", device, number=1, repeat=1)(*args).mean
    repeats = int(min(MAX_REPEATS, max(3, TIME_BUDGET_S / max(once, 1e-6))))
    timer = vm.time_evaluator("main", device, number=1, repeat=repeats)
    return Run(outputs, statistics.median(timer(*args).results) * 1e3)


def outputs_on(path: Path, inputs: Sequence[Sequence[Any]]) -> list[list[Any]]:
    """The outputs of the exported library at ``path`` on each set of ``inputs`` (loaded
    once, untimed)."""
    import tvm

    vm, device = _vm(path)
    return [_outputs(vm["main"](*[tvm.runtime.tensor(a, device) for a in arrays]))
            for arrays in inputs]  # fmt: skip


def _vm(path: Path) -> tuple[Any, Any]:
    """A fresh Relax VM on the CPU over the exported library at ``path``, and that CPU."""
    import tvm
    from tvm import relax

    request_amx()  # a kernel on AMX tiles needs the tile state (False where there is none)
    device = tvm.cpu()
    return relax.VirtualMachine(tvm.runtime.load_module(str(path)), device), device


def _outputs(result: Any) -> list[Any]:
    """``main``'s result (a tensor or a tuple of them) as numpy arrays."""
    import numpy as np
    import tvm

    results = [result] if isinstance(result, tvm.runtime.Tensor) else list(result)
    return [np.asarray(r.numpy()) for r in results]


def max_abs_error(
    reference: Sequence[Any], got: Sequence[Any], atol: float = ATOL, rtol: float = RTOL
) -> float:
    """The largest absolute difference between two builds' outputs; `OutputsDiffer` when
    they differ in number, shape, dtype, where they are finite, or beyond ``atol + rtol x
    max(|reference|, FLOOR x max |reference|)`` anywhere."""
    import numpy as np

    if len(reference) != len(got):
        raise OutputsDiffer(f"{len(got)} outputs instead of {len(reference)}")
    worst = 0.0
    for index, (ref, out) in enumerate(zip(reference, got, strict=True)):
        if ref.shape != out.shape or ref.dtype != out.dtype:
            raise OutputsDiffer(f"output {index} is {out.shape} {out.dtype}, not "
                                f"{ref.shape} {ref.dtype}")  # fmt: skip
        finite = np.isfinite(ref)
        if not np.array_equal(finite, np.isfinite(out)):
            raise OutputsDiffer(f"output {index} is not finite where the reference is")
        if not finite.any():
            continue
        ref64, out64 = ref[finite].astype("float64"), out[finite].astype("float64")
        diff = np.abs(out64 - ref64)
        # An element that a sum cancelled to near zero carries the rounding error of its large
        # terms: its tolerance is relative to at least a fraction of the output's largest.
        magnitude = np.maximum(np.abs(ref64), FLOOR * float(np.abs(ref64).max()))
        if not np.all(diff <= atol + rtol * magnitude):
            raise OutputsDiffer(f"output {index} differs by up to {float(diff.max()):.3g} "
                                f"(tolerance {atol} + {rtol} x max(|value|, {FLOOR} x "
                                "the largest |value|))")  # fmt: skip
        worst = max(worst, float(diff.max()))
    return worst


def agreement(reference: Sequence[Sequence[Any]], got: Sequence[Sequence[Any]]) -> float:
    """The lowest cosine similarity between the outputs of two builds of a model (a
    reduced-precision one against float32), each run on the same inputs (``reference[i]``:
    the outputs of input ``i``); `OutputsDiffer` when they differ in number, shape or where
    they are finite, a cosine is under `MIN_COSINE`, or a row of 2-D logits (``[batch,
    classes]``) picks another class than float32 does (`TIE` aside)."""
    import numpy as np

    worst = 1.0
    for ref_outputs, got_outputs in zip(reference, got, strict=True):
        if len(ref_outputs) != len(got_outputs):
            raise OutputsDiffer(f"{len(got_outputs)} outputs instead of {len(ref_outputs)}")
        for index, (ref, out) in enumerate(zip(ref_outputs, got_outputs, strict=True)):
            if ref.shape != out.shape:
                raise OutputsDiffer(f"output {index} is {out.shape}, not {ref.shape}")
            if not np.array_equal(np.isfinite(ref), np.isfinite(out)):
                raise OutputsDiffer(f"output {index} is not finite where the reference is")
            ref64 = np.nan_to_num(ref.astype("float64"), posinf=0.0, neginf=0.0).ravel()
            out64 = np.nan_to_num(out.astype("float64"), posinf=0.0, neginf=0.0).ravel()
            norms = float(np.linalg.norm(ref64) * np.linalg.norm(out64))
            cosine = float(ref64 @ out64) / norms if norms else float(np.array_equal(ref64, out64))
            if cosine < MIN_COSINE:
                raise OutputsDiffer(f"output {index}: cosine similarity {cosine:.6f} to float32, "
                                    f"under {MIN_COSINE}")  # fmt: skip
            worst = min(worst, cosine)
            if ref.ndim == 2 and ref.shape[1] > 1 and ref.dtype.kind == "f":
                _same_top_class(index, ref.astype("float64"), out.astype("float64"))
    return worst


def _same_top_class(index: int, ref: Any, out: Any) -> None:
    """`OutputsDiffer` when a row of logits ``out`` picks another class than ``ref`` does,
    unless float32 itself nearly ties them (its lead under `TIE` x the row's largest |logit|)."""
    import numpy as np

    for row, (r, o) in enumerate(zip(ref, out, strict=True)):
        want, chose = int(np.argmax(r)), int(np.argmax(o))
        if want != chose and r[want] - r[chose] > TIE * float(np.max(np.abs(r))):
            raise OutputsDiffer(f"output {index}, row {row}: top class {chose}, float32's is "
                                f"{want}")  # fmt: skip
