"""Parsing untrusted TIR — TVMScript text or TVM JSON — in a child process with limits.

TVMScript parsing evaluates Python expressions, so the service never parses submitted text in
its own process. `parse_untrusted` first checks the text's Python syntax tree (no imports but
TVMScript's own, no dunder names, nothing but one function or module definition), then runs
``python -m tuning.tir_sandbox`` with a CPU-time limit, an address-space limit, a wall-clock
timeout and an empty environment; the child prints the normalised workload as JSON.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from typing import Any

MAX_SOURCE_BYTES = 256 * 1024
CPU_SECONDS = 10
ADDRESS_SPACE_BYTES = 2 << 30
WALL_SECONDS = 45
MAX_BUFFER_BYTES = 1 << 30
ALLOWED_IMPORTS = {
    "tvm",
    "tvm.script",
    "tvm.script.tir",
    "tvm.script.tirx",
    "tvm.script.ir",
    "tvm.tirx",
    "tvm.ir",
}


class TirRejected(ValueError):
    """Submitted TIR that is unsafe, malformed, or not a single static-shape function."""


@dataclass(frozen=True)
class ParsedTir:
    """A submitted function, normalised as the store keeps workloads."""

    mod_json: str
    shash: str
    flop: float


def check_syntax(source: str) -> str:
    """Reject TVMScript whose Python syntax goes beyond a function or module definition.

    Returns the source with its (allowed) import lines blanked: the TVMScript parser defines
    ``T`` and ``I`` itself and refuses import statements.
    """
    if len(source.encode()) > MAX_SOURCE_BYTES:
        raise TirRejected(f"source is larger than {MAX_SOURCE_BYTES} bytes")
    try:
        tree = ast.parse(source)
    except SyntaxError as err:
        raise TirRejected(f"not valid Python syntax: {err.msg} (line {err.lineno})") from None
    definitions = 0
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            module = node.module if isinstance(node, ast.ImportFrom) else None
            names = [module] if module else [a.name for a in node.names]
            if not all(n in ALLOWED_IMPORTS for n in names):
                raise TirRejected(f"import of {', '.join(map(str, names))} is not allowed")
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            definitions += 1
        else:
            raise TirRejected(
                f"only a @T.prim_func or @I.ir_module definition is allowed, "
                f"found {type(node).__name__} at line {node.lineno}"
            )
    if definitions != 1:
        raise TirRejected("exactly one @T.prim_func (or @I.ir_module) definition is expected")
    lines = source.splitlines()
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for index in range(node.lineno - 1, (node.end_lineno or node.lineno)):
                lines[index] = ""
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)) and node not in tree.body:
            raise TirRejected(f"import inside the function (line {node.lineno})")
        name = getattr(node, "id", None) or getattr(node, "attr", None)
        if isinstance(name, str) and "__" in name:
            raise TirRejected(f"name {name!r} is not allowed (line {node.lineno})")
        if isinstance(node, (ast.Lambda, ast.Global, ast.Nonlocal, ast.AsyncFunctionDef)):
            raise TirRejected(f"{type(node).__name__} is not allowed (line {node.lineno})")
    return "\n".join(lines) + "\n"


def _limit_child() -> None:  # runs in the child before exec
    import resource

    resource.setrlimit(resource.RLIMIT_CPU, (CPU_SECONDS, CPU_SECONDS))
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE_BYTES, ADDRESS_SPACE_BYTES))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    os.setsid()


def parse_untrusted(fmt: str, source: str) -> ParsedTir:
    """Parse submitted TIR in a limited child process; raise `TirRejected` with the reason."""
    if fmt == "tvmscript":
        source = check_syntax(source)
    elif fmt != "json":
        raise TirRejected(f"unknown format {fmt!r}: use 'tvmscript' or 'json'")
    elif len(source.encode()) > MAX_SOURCE_BYTES:
        raise TirRejected(f"source is larger than {MAX_SOURCE_BYTES} bytes")
    env = {
        "PATH": "/usr/bin:/bin",
        "PYTHONPATH": os.pathsep.join(p for p in sys.path if p),
        "OMP_NUM_THREADS": "1",
        "TVM_NUM_THREADS": "1",
    }
    try:
        done = subprocess.run(
            [sys.executable, "-m", "tuning.tir_sandbox"],
            input=json.dumps({"format": fmt, "source": source}),
            capture_output=True,
            text=True,
            timeout=WALL_SECONDS,
            env=env,
            preexec_fn=_limit_child,  # noqa: PLW1509 - resource limits need it
        )
    except subprocess.TimeoutExpired:
        raise TirRejected(f"parsing took longer than {WALL_SECONDS} s") from None
    if done.returncode != 0:
        reason = (
            "killed by its CPU-time or memory limit"
            if done.returncode < 0
            else (done.stderr.strip().splitlines() or ["exited with an error"])[-1]
        )
        raise TirRejected(f"the parser failed: {reason[:500]}")
    result = json.loads(done.stdout)
    if not result["ok"]:
        raise TirRejected(result["error"])
    return ParsedTir(mod_json=result["mod_json"], shash=result["shash"], flop=result["flop"])


def _parse_in_child(fmt: str, source: str) -> dict[str, Any]:
    import numpy as np
    import tvm
    from tvm.s_tir.analysis import estimate_tir_flops

    from tuning.workload import arg_specs, normalize, structural_hash

    if fmt == "tvmscript":
        from tvm.script.parser.core.entry import parse

        obj = parse(source)
    else:
        obj = tvm.ir.load_json(source)
    if isinstance(obj, tvm.IRModule):
        funcs = [f for _, f in obj.functions_items() if isinstance(f, tvm.tirx.PrimFunc)]
        if len(funcs) != 1 or len(obj.functions_items()) != 1:
            return {"ok": False, "error": "the module must hold exactly one PrimFunc"}
        obj = funcs[0]
    if not isinstance(obj, tvm.tirx.PrimFunc):
        return {"ok": False, "error": f"expected a PrimFunc, got {type(obj).__name__}"}
    mod = normalize(obj)
    try:
        specs = arg_specs(mod["main"])
    except (TypeError, ValueError, KeyError):
        return {"ok": False, "error": "every parameter must be a buffer of static shape"}
    if len(specs) < 2:
        return {"ok": False, "error": "the function needs inputs and one output (last)"}
    total = sum(int(np.prod(shape)) * tvm.DataType(dtype).bits // 8 for shape, dtype in specs)
    if total > MAX_BUFFER_BYTES:
        return {"ok": False, "error": f"buffers take {total} bytes, over {MAX_BUFFER_BYTES}"}
    return {
        "ok": True,
        "mod_json": tvm.ir.save_json(mod),
        "shash": structural_hash(mod),
        "flop": float(estimate_tir_flops(mod)),
    }


def main() -> None:
    """Child entry point: one request on stdin, one JSON answer on stdout."""
    request = json.loads(sys.stdin.read())
    try:
        answer = _parse_in_child(request["format"], request["source"])
    except Exception as err:  # noqa: BLE001 - any parse failure is the submitter's to read
        lines = [line.strip() for line in str(err).strip().splitlines() if line.strip()]
        reason = next((line for line in lines if line.startswith("error:")), None)
        reason = reason or (lines[-1] if lines else "")
        answer = {"ok": False, "error": f"{type(err).__name__}: {reason}"[:1000]}
    sys.stdout.write(json.dumps(answer))


if __name__ == "__main__":
    main()
