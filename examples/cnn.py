"""Tune a small CNN through tunehub, then build and run it with the tuned schedules.

The model is an ONNX file built by hand (`onnx.helper`, random weights; a PyTorch export works
the same). The server tunes each of its tasks; this script then compiles its *own* Relax
module with `service.client.relax_build.build` (every task's verified schedule fetched in one
request), checks it against an untuned build and against the library the server compiled,
and prints the speed-up.

    make run                                  # in another terminal: a server with a worker
    .venv/bin/python examples/cnn.py [--server URL] [--trials 64] [--target host]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import tvm
from onnx import TensorProto, helper, numpy_helper
from tvm import relax
from tvm.relax.frontend.onnx import from_onnx

from service.client import TunehubClient
from service.client.models import download_model, submit_model, wait_model
from service.client.relax_build import build
from tuning.hardware.threads import pin_runtime_threads, target_threads


def small_cnn(size: int = 32, seed: int = 0) -> onnx.ModelProto:
    """conv3x3(3→16)+relu, conv3x3/2(16→32)+relu, global average pool, dense(32→10) on a
    1x3x``size``x``size`` input "x"."""
    rng = np.random.default_rng(seed)
    weights = {"w1": (16, 3, 3, 3), "b1": (16,), "w2": (32, 16, 3, 3), "b2": (32,),
               "w3": (10, 32), "b3": (10,)}  # fmt: skip
    inits = [numpy_helper.from_array((rng.standard_normal(s) * 0.2).astype("float32"), name)
             for name, s in weights.items()]  # fmt: skip
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1], strides=[2, 2]),
        helper.make_node("Relu", ["c2"], ["r2"]),
        helper.make_node("GlobalAveragePool", ["r2"], ["p"]),
        helper.make_node("Flatten", ["p"], ["f"]),
        helper.make_node("Gemm", ["f", "w3", "b3"], ["y"], transB=1),
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, size, size])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])
    graph = helper.make_graph(nodes, "small_cnn", [x], [y], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def fastest_ms(vms: list[Any], x: Any, rounds: int = 3) -> list[float]:
    """Each VM's fastest time for ``main(x)`` over ``rounds`` interleaved rounds (other work on
    the machine only ever slows a run down)."""
    timers = [vm.time_evaluator("main", tvm.cpu(), number=10, repeat=3, min_repeat_ms=50)
              for vm in vms]  # fmt: skip
    best = [float("inf")] * len(vms)
    for _ in range(rounds):
        best = [min(b, *t(x).results) for b, t in zip(best, timers, strict=True)]
    return [b * 1e3 for b in best]


def parse_args(description: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--server", help="tunehub URL (default $TUNEHUB_URL or :8000)")
    parser.add_argument("--trials", type=int, default=64, help="the model's total budget")
    parser.add_argument("--target", default="host", help='"host" or a TVM target as JSON')
    return parser.parse_args()


def run_example(model: onnx.ModelProto, shape: list[int], args: argparse.Namespace) -> int:
    """Tune ``model`` (one float32 input "x" of ``shape``) through tunehub, build it with the
    tuned schedules and without, check the outputs and print the speed-up."""
    with TunehubClient(args.server, timeout=300) as client, tempfile.TemporaryDirectory() as tmp:
        target = args.target if args.target == "host" else json.loads(args.target)
        canonical = client.targets()["host"]["canonical"] if target == "host" else target
        pin_runtime_threads(target_threads(canonical) or 1)  # the cores the schedules ran on

        # 1. Submit the model and follow its tasks' jobs and its compile.
        path = Path(tmp) / f"{model.graph.name}.onnx"
        onnx.save(model, path)
        inputs = [{"name": "x", "shape": shape, "dtype": "float32"}]
        submitted = submit_model(client, path, inputs, args.trials, target=target)
        print(f"model {submitted['id']}: {submitted['progress']['tasks']} tasks, "
              f"{args.trials} trials", flush=True)  # fmt: skip
        shown: list[str] = []

        def progress(m: dict[str, Any]) -> None:
            p = m["progress"]
            line = (
                f"  {m['state']}: {p['tasks_done']}/{p['tasks']} tasks, {p['trials_done']} trials"
            )
            if line not in shown:
                shown.append(line)
                print(line, flush=True)

        done = wait_model(client, submitted["id"], on_progress=progress, poll_s=2)
        if done["state"] != "succeeded":
            print(f"model {done['id']} {done['state']}: {done['error']}", file=sys.stderr)
            return 1

        # 2. Build our own module with the tuned schedules, and without them.
        mod = from_onnx(model, shape_dict={"x": shape}, keep_params_in_input=False)
        tuned = relax.VirtualMachine(build(mod, canonical, client=client), tvm.cpu())
        plain = tvm.compile(mod, target=tvm.target.Target(canonical))
        untuned = relax.VirtualMachine(plain, tvm.cpu())
        x = tvm.runtime.tensor(np.random.default_rng(1).standard_normal(shape).astype("float32"))
        out = tuned["main"](x).numpy()
        np.testing.assert_allclose(out, untuned["main"](x).numpy(), rtol=1e-3, atol=1e-3)

        # 3. The library the server compiled (weights packed inside) gives the same output.
        library = Path(tmp) / f"{model.graph.name}.so"
        download_model(client, done["id"], library)
        served = relax.VirtualMachine(tvm.runtime.load_module(str(library)), tvm.cpu())
        np.testing.assert_allclose(served["main"](x).numpy(), out, rtol=1e-3, atol=1e-3)

        tuned_ms, untuned_ms = fastest_ms([tuned, untuned], x)
        print(f"outputs agree: our tuned build, our untuned build, the server's library "
              f"({done['result']['tasks_applied']} of {done['progress']['tasks']} "
              "tasks tuned)")  # fmt: skip
        print(f"tuned {tuned_ms:.3f} ms, untuned {untuned_ms:.3f} ms: "
              f"speed-up {untuned_ms / tuned_ms:.2f}x")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(run_example(small_cnn(32), [1, 3, 32, 32], parse_args(__doc__.splitlines()[0])))
