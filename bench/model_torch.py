"""PyTorch CPU as a user runs a model: the module itself (`bench/torch_zoo.py`) in inference
mode, eager, and ``torch.compile`` of it timed alone in a fresh process (this file run as a
script); each also under ``torch.autocast("cpu", dtype=torch.bfloat16)`` (issue 39: oneDNN's
bf16 kernels, AMX where the CPU has it), its output cast back to float32.

    .venv/bin/python bench/model_torch.py NAME [--repeat 5] [--bf16]
    # "<median ms> <max rel. error vs fp32 eager> <cosine vs fp32 eager>"
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from kernel_quality import settle, time_callable  # noqa: E402
from torch_zoo import MODULES, input_shape, make_module  # noqa: E402


def torch_callable(
    name: str, compiled: bool, bf16: bool = False
) -> Callable[[np.ndarray], np.ndarray]:
    """Model ``name`` (`torch_zoo.make_module`: the weights every way of the benchmark runs)
    as a function of a numpy input, in inference mode, optionally `torch.compile`d, optionally
    under bf16 autocast (the output as float32)."""
    import contextlib

    import torch

    module = make_module(name)
    run = torch.compile(module) if compiled else module

    def call(x: np.ndarray) -> np.ndarray:
        autocast = (torch.autocast("cpu", dtype=torch.bfloat16) if bf16
                    else contextlib.nullcontext())  # fmt: skip
        with torch.inference_mode(), autocast:
            return np.asarray(run(torch.from_numpy(x)).float().numpy())

    return call


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    """The cosine similarity of two outputs (flattened, in float64)."""
    a64, b64 = a.astype("float64").ravel(), b.astype("float64").ravel()
    return float(a64 @ b64 / max(float(np.linalg.norm(a64) * np.linalg.norm(b64)), 1e-300))


def compiled_latency(
    name: str, repeat: int, bf16: bool = False
) -> tuple[float, float, float] | str:
    """``torch.compile``'s median ms on model ``name`` (under bf16 autocast with ``bf16``), its
    max relative error and cosine against fp32 eager, measured in a fresh process (`main`); or
    why it failed. In the benchmark's own process, next to TVM's thread pool and after the
    other ways, it ran 10x slower than eager (4.9 ms for the small CNN): that measures the
    neighbourhood, not inductor."""
    done = subprocess.run(
        [sys.executable, __file__, name, "--repeat", str(repeat), *(["--bf16"] if bf16 else [])],
        capture_output=True, text=True, timeout=1800, env=dict(os.environ),
    )  # fmt: skip
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        return f"torch.compile (fresh process) failed: {done.stderr.strip()[-200:]}"
    ms, error, cos = (float(v) for v in lines[-1].split())
    return ms, error, cos


def main() -> int:
    """Print ``torch.compile``'s median ms, its max relative error and cosine against fp32 eager
    on one model (same weights and input as `bench/model.py`'s)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("name", choices=sorted(MODULES))
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--bf16", action="store_true", help="under bf16 autocast")
    args = parser.parse_args()
    import torch

    torch.set_num_threads(int(os.environ.get("BENCH_THREADS", os.cpu_count() or 1)))
    x = np.random.default_rng(0).standard_normal(input_shape(args.name)).astype("float32")
    eager = torch_callable(args.name, False)(x)
    compiled = torch_callable(args.name, True, args.bf16)
    got = compiled(x)
    error = float(np.max(np.abs(got - eager))) / max(float(np.max(np.abs(eager))), 1e-30)
    settle()
    ms = time_callable(lambda: compiled(x), args.repeat) * 1e3
    print(f"{ms} {error} {cosine(got, eager)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
