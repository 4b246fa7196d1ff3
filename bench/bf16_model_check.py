"""A model in tunehub's bfloat16 (issue 39, item 4 and 5) against float32, by the check a bf16
model job's compile applies (`tuning.models.run.agreement`): every output's cosine similarity
over `AGREEMENT_INPUTS` seeded inputs, and the top class of 2-D logits, beside PyTorch's own
bf16 autocast on the same module and inputs.

Both TVM builds are untuned (the numbers do not depend on a schedule: bf16 products are exact in
float32, only the order of the float32 sums moves), so this runs on any host; where the CPU has
no bf16 unit TVM computes bf16 in float32 on the same rounded operands, slowly.

    .venv/bin/python bench/bf16_model_check.py [--models bert,cnn,resnet18]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from model_torch import cosine, torch_callable  # noqa: E402
from torch_zoo import MODULES, export_onnx, input_shape, make_module  # noqa: E402


def check(name: str, folder: Path) -> str:
    """One line: the bf16 build's lowest cosine (or why the check refuses it) and its top-1
    agreement, PyTorch autocast's lowest cosine, and the untuned builds' times."""
    import tvm
    from tvm.relax.frontend.onnx import from_onnx
    from tvm.s_tir import meta_schedule as ms

    from tuning.checks.library_check import export_library
    from tuning.hardware.targets import resolve_target
    from tuning.models.pipeline import compile_with, tuning_pipeline
    from tuning.models.run import AGREEMENT_INPUTS, OutputsDiffer, agreement, outputs_on

    shape = input_shape(name)
    model = export_onnx(make_module(name), shape)
    mod = from_onnx(model, shape_dict={"x": shape}, keep_params_in_input=False)
    target = tvm.target.Target(resolve_target("host").canonical)
    inputs = [[np.random.default_rng(seed).standard_normal(shape).astype("float32")]
              for seed in range(AGREEMENT_INPUTS)]  # fmt: skip
    runs, walls = {}, {}
    for precision, fast_math in (("float32", False), ("bfloat16", True)):
        fused = tuning_pipeline(mod, target, fast_math, precision=precision)
        path = folder / f"{name}-{precision}.so"
        export_library(compile_with(fused, target, ms.database.MemoryDatabase()), path)
        started = time.monotonic()
        runs[precision] = outputs_on(path, inputs)
        walls[precision] = (time.monotonic() - started) / len(inputs) * 1e3
    try:
        lowest = agreement(runs["float32"], runs["bfloat16"])
        verdict = f"min cosine {lowest:.6f} (1 - cosine {1 - lowest:.1e})"
    except OutputsDiffer as err:
        verdict = f"refused: {err}"
    fp32 = [outs[0] for outs in runs["float32"]]
    top1 = ""
    if fp32[0].ndim == 2 and fp32[0].shape[1] > 1:
        same = sum(int(np.argmax(a) == np.argmax(b[0]))
                   for a, b in zip(fp32, runs["bfloat16"], strict=True))  # fmt: skip
        top1 = f", same top-1 on {same}/{len(fp32)}"
    torch_bf16 = torch_callable(name, False, bf16=True)
    torch_cos = min(cosine(torch_bf16(x[0]), ref) for x, ref in zip(inputs, fp32, strict=True))
    return (f"{name}: tunehub bf16 vs float32 (exact math) over {len(inputs)} inputs: {verdict}"
            f"{top1}; torch bf16 autocast min cosine {torch_cos:.6f} (1 - cosine "
            f"{1 - torch_cos:.1e}); untuned TVM "
            f"{walls['float32']:.0f} ms fp32, {walls['bfloat16']:.0f} ms bf16 a run")  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default="bert,cnn,resnet18")
    args = parser.parse_args()
    from tuning.hardware.bf16 import has_bf16_dot
    from tuning.hardware.targets import resolve_target

    host = resolve_target("host")
    print(f"host {host.canonical}; bf16 dot product: {has_bf16_dot(host.tvm())}", flush=True)
    with tempfile.TemporaryDirectory(prefix="tunehub-bf16-check-") as tmp:
        for name in args.models.split(","):
            if name not in MODULES:
                parser.error(f"unknown model {name}: choose from {', '.join(MODULES)}")
            print(check(name, Path(tmp)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
