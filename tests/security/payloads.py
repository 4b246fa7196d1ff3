"""The security probe's payloads (issue 25, against c7ee873), rebuilt for the tests.

`init_array_asm(marker)` is LLVM module-level inline assembly that adds a constructor to the
``.init_array`` of any library it is linked into: the constructor calls ``system("touch
<marker>")``, so the marker file appears when a process loads the library. `probe_trace`
annotates a loop of `probe_module`'s function with ``pragma_import_llvm`` carrying it: LLVM's
code generator links the text into the kernel's module. On c7ee873 an import of that record
made the worker (uid 0) create the marker ~3 s later.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def init_array_asm(marker: Path) -> str:
    """LLVM IR text: a constructor in ``.init_array`` that runs ``touch <marker>``."""
    lines = [
        ".text",
        ".globl tunehub_probe_ctor",
        "tunehub_probe_ctor:",
        "  lea tunehub_probe_cmd(%rip), %rdi",
        "  jmp system@PLT",
        ".section .rodata",
        f"tunehub_probe_cmd: .asciz \\22touch {marker}\\22",
        ".section .init_array,\\22aw\\22",
        ".quad tunehub_probe_ctor",
        ".text",
    ]
    return "\n".join(f'module asm "{line}"' for line in lines) + "\n"


def probe_module() -> Any:
    """B[i] = 2 A[i] over 16 float32: a user function any identity may submit."""
    import tvm
    from tvm import te

    a = te.placeholder((16,), "float32", name="A")
    b = te.compute((16,), lambda i: a[i] * 2.0, name="B")
    return tvm.IRModule({"main": te.create_prim_func([a, b])})


def annotated_trace(key: str, value: str) -> list[Any]:
    """The plain-JSON trace that annotates `probe_module`'s loop with ``key`` = ``value``."""
    from tvm.s_tir.schedule import Schedule

    from tuning.traces import plain_json

    sch = Schedule(probe_module())
    (loop,) = sch.get_loops(sch.get_sblock("B"))
    sch.annotate(loop, key, value)
    return json.loads(json.dumps(plain_json(sch.trace.as_json())))


def probe_trace(marker: Path) -> list[Any]:
    """The probe's record trace: ``pragma_import_llvm`` with `init_array_asm`."""
    return annotated_trace("pragma_import_llvm", init_array_asm(marker))


def probe_library(marker: Path, path: Path, options: list[str] | None = None) -> Path:
    """The library c7ee873's worker built from `probe_trace` (built here with TVM directly,
    past every gate; never load it)."""
    import tvm
    from tvm.s_tir.schedule import Schedule, Trace

    sch = Schedule(probe_module())
    Trace.apply_json_to_schedule(probe_trace(marker), sch)
    tvm.compile(sch.mod, target="llvm").export_library(str(path), options=options or [])
    return path
