"""A hardware measurement in a fresh process whose TVM pool has a given number of threads, as
a worker pins its pool before it measures (TVM sizes the pool once per process)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def measured_in_fresh_process(function: str, canonical: dict[str, Any], threads: int) -> Any:
    """``function`` ("module:name", taking a canonical target JSON) called on ``canonical`` in
    a fresh interpreter on ``threads`` TVM threads; its result, JSON (dataclasses as dicts)."""
    module, name = function.split(":")
    code = (
        "import dataclasses, json, sys\n"
        f"from {module} import {name} as measure\n"
        "result = measure(json.loads(sys.argv[1]))\n"
        "print(json.dumps(dataclasses.asdict(result) if dataclasses.is_dataclass(result) "
        "else result))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, json.dumps(canonical)], capture_output=True, text=True,
        timeout=300, cwd=ROOT,
        env={**os.environ, "TVM_NUM_THREADS": str(threads), "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.splitlines()[-1])
