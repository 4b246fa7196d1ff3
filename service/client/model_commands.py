"""The CLI's whole-model commands: ``submit-model``, ``model``, ``cancel-model``,
``fetch-model``."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from service.client.commands import server_options
from service.client.http import TunehubClient
from service.client.models import (
    cancel_model,
    download_model,
    get_model,
    submit_model,
    wait_model,
)

DTYPES = ("float32", "float16", "int8", "uint8", "int32", "int64", "bool")


def _inputs(shapes: list[str], dtypes: list[str]) -> list[dict[str, Any]]:
    """``--input-shape x=1,3,224,224`` and ``--input-dtype x=float16`` as the API's inputs."""
    types = {}
    for text in dtypes:
        name, _, dtype = text.partition("=")
        if dtype not in DTYPES:
            raise SystemExit(f"--input-dtype {text!r}: expected NAME=one of {', '.join(DTYPES)}")
        types[name] = dtype
    found = []
    for text in shapes:
        name, _, dims = text.partition("=")
        try:
            shape = [int(d) for d in dims.split(",")]
        except ValueError:
            raise SystemExit(f"--input-shape {text!r}: expected NAME=D1,D2,...") from None
        if not name or not dims:
            raise SystemExit(f"--input-shape {text!r}: expected NAME=D1,D2,...")
        found.append({"name": name, "shape": shape, "dtype": types.get(name, "float32")})
    unknown = set(types) - {i["name"] for i in found}
    if unknown:
        raise SystemExit(f"--input-dtype names no --input-shape: {', '.join(sorted(unknown))}")
    return found


def _line(model: dict[str, Any]) -> str:
    p = model["progress"]
    layout = " (blocked layout)" if model.get("layout") == "blocked" else ""
    layout += " (bfloat16)" if model.get("precision") == "bfloat16" else ""
    line = (
        f"model {model['id']}{layout} {model['state']}: {p['tasks_done']}/{p['tasks']} tasks "
        f"({p['tasks_cache_hit']} cached), {p['trials_done']}/{p['trials']} trials"
    )
    result = model.get("result")
    if result:
        line += (
            f"; {result['tuned_ms']:.3f} ms tuned vs {result['untuned_ms']:.3f} ms untuned "
            f"({result['speedup_vs_untuned']:.1f}x), {result['tasks_applied']} tuned tasks"
        )
    if model.get("error"):
        line += f"; error: {model['error']}"
    return line


def _client(args: argparse.Namespace) -> TunehubClient:
    return TunehubClient(args.server, token=args.token)


def cmd_submit_model(args: argparse.Namespace) -> int:
    """Submit a model (ONNX or Relax TVMScript); with --wait follow it to the end."""
    target: Any = args.target
    if target.startswith("{"):
        target = json.loads(target)
    inputs = _inputs(args.input_shape, args.input_dtype)
    with _client(args) as client:
        try:
            model = submit_model(client, args.model, inputs, args.trials, target, args.name,
                                 layout=args.layout, precision=args.precision)  # fmt: skip
        except (OSError, ValueError) as err:
            print(f"tunehub: {err}", file=sys.stderr)
            return 2
        print(f"model {model['id']}: {model['progress']['tasks']} tasks, {model['state']}")
        if not args.wait:
            return 0
        last = [""]

        def show(current: dict[str, Any]) -> None:
            line = _line(current)
            if line != last[0]:
                print(line, file=sys.stderr)
                last[0] = line

        final = wait_model(client, model["id"], show, poll_s=args.poll)
    print(_line(final))
    return 0 if final["state"] == "succeeded" else 1


def cmd_model(args: argparse.Namespace) -> int:
    """Show a model and its tasks."""
    with _client(args) as client:
        model = get_model(client, args.model_id)
    print(_line(model))
    for task in model.get("tasks") or []:
        job = task["job"]
        best = f"{job['best_latency_us']:.2f} us" if job["best_latency_us"] else "-"
        print(
            f"  {task['position']:>3} {task['name'][:40]:<40} x{task['weight']:<3} "
            f"job {job['id']:>5} {job['state']:<10} {job['trials_done']:>5}/{task['trials']:<5} "
            f"{best}"
        )
    return 0


def cmd_cancel_model(args: argparse.Namespace) -> int:
    """Cancel a model."""
    with _client(args) as client:
        print(_line(cancel_model(client, args.model_id)))
    return 0


def cmd_fetch_model(args: argparse.Namespace) -> int:
    """Download a compiled model (sha256-checked)."""
    output = args.output or f"model{args.model_id}.so"
    with _client(args) as client:
        sha = download_model(client, args.model_id, output)
    print(f"{output}: sha256 {sha}")
    return 0


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """The model commands, each with the client's ``--server``/``--token`` options."""
    p = sub.add_parser("submit-model", help="tune and compile a whole model (ONNX or Relax)")
    p.add_argument("model", help="an .onnx file or a Relax IRModule as TVMScript (.py)")
    p.add_argument(
        "--input-shape",
        action="append",
        required=True,
        metavar="NAME=D1,D2,...",
        help="an input's static shape (repeat for each input)",
    )
    p.add_argument("--input-dtype", action="append", default=[], metavar="NAME=DTYPE")
    p.add_argument("--trials", type=int, required=True, help="total budget, shared by tasks")
    p.add_argument("--target", default="host", help='"host" or a TVM target as JSON')
    p.add_argument("--name", default=None)
    p.add_argument("--layout", choices=("plain", "blocked"), default="plain",
                   help="convolutions as written, or in a blocked channel layout (NCHW[x]c) kept "
                   "between layers; build with the same (docs/model-jobs.md)")  # fmt: skip
    p.add_argument("--precision", choices=("float32", "bfloat16"), default="float32",
                   help="matmuls and convolutions in float32, or on bf16 operands with float32 "
                   "sums (a target with AVX512-BF16); build with the same")  # fmt: skip
    p.add_argument("--wait", action="store_true", help="follow the model until it is final")
    p.add_argument("--poll", type=float, default=2.0, help=argparse.SUPPRESS)
    server_options(p)
    p.set_defaults(func=cmd_submit_model)
    p = sub.add_parser("model", help="show a model's tasks and result")
    p.add_argument("model_id", type=int)
    server_options(p)
    p.set_defaults(func=cmd_model)
    p = sub.add_parser("cancel-model", help="cancel a model and its unfinished task jobs")
    p.add_argument("model_id", type=int)
    server_options(p)
    p.set_defaults(func=cmd_cancel_model)
    p = sub.add_parser("fetch-model", help="download a compiled model (Relax VM library)")
    p.add_argument("model_id", type=int)
    p.add_argument("-o", "--output", default=None)
    server_options(p)
    p.set_defaults(func=cmd_fetch_model)
