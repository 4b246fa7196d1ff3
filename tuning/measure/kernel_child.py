"""The kernel runner a jail runs for a job: it loads compiled kernel libraries, then runs or
times them on request, for as long as its parent keeps stdin open.

Runs unprivileged, without network, in a read-only root that shows the job's kernel
directory (see `tuning.measure.kernel_jail`, the parent's side). Requests arrive on stdin as
``<length>\\n<JSON>``; each answer leaves on a private copy of stdout as one frame
(``TUNEHUB-ANSWER <length>\\n<JSON>``), stdout itself pointing at stderr so that nothing a
kernel or TVM prints can pass for an answer. The first frame says the runner is ready.

Requests (``op``):

* ``time``: ``library``, ``entry``, ``args`` ([[shape, dtype], ...]), ``number``, ``repeat``,
  ``min_repeat_ms`` → ``run_secs``: the entry timed by `time_evaluator` on random operands;
* ``run``: ``library``, ``inputs`` (``.npy`` file names in the kernel directory; a
  ``.bf16.npy`` file holds a bfloat16 array's uint16 bits), ``packed``
  ([{index, function, packed_shape, dtype}]: weights packed by their ``pack_<i>`` first,
  then ``main_packed`` runs), ``out`` ([shape, dtype]) → ``output``: its bytes in base64;
* ``forget``: ``library`` → the module is dropped.

A library is checked (`tuning.checks.library_check`) before it is loaded, here as in the
parent; any failure of a request is ``{"ok": false, "error": ...}`` and the runner goes on.
"""

from __future__ import annotations

import base64
import json
import os
import sys
from collections import OrderedDict
from pathlib import Path
from typing import Any, BinaryIO

from tuning.checks.library_check import check_library
from tuning.hardware.bf16 import request_amx

FRAME = b"TUNEHUB-ANSWER "
MAX_REQUEST_BYTES = 1 << 20
CACHED_MODULES = 8
DEVICE_TYPES = {"llvm": "cpu", "cuda": "cuda", "rocm": "rocm"}  # target kind -> TVM device


class Kernels:
    """Loaded libraries of one kernel directory, run on one device."""

    def __init__(self, directory: Path, kind: str) -> None:
        import tvm

        self.directory = directory
        self.device = tvm.device(DEVICE_TYPES[kind], 0)
        self.modules: OrderedDict[str, Any] = OrderedDict()

    def _path(self, name: Any) -> Path:
        if not isinstance(name, str) or "/" in name or name.startswith("."):
            raise ValueError(f"not a file of the kernel directory: {name!r}")
        return self.directory / name

    def module(self, name: str) -> Any:
        import tvm

        if name in self.modules:
            self.modules.move_to_end(name)
            return self.modules[name]
        path = self._path(name)
        check_library(path)
        module = tvm.runtime.load_module(str(path))
        self.modules[name] = module
        while len(self.modules) > CACHED_MODULES:
            self.modules.popitem(last=False)
        return module

    def time(self, request: dict[str, Any]) -> dict[str, Any]:
        import numpy as np
        import tvm

        from tuning.catalog.dtypes import random_operand

        module = self.module(request["library"])
        rng = np.random.default_rng(0)
        args = [
            tvm.runtime.tensor(random_operand(tuple(shape), dtype, rng), self.device)
            for shape, dtype in request["args"]
        ]
        timer = module.time_evaluator(
            request.get("entry", "main"),
            self.device,
            number=int(request.get("number", 1)),
            repeat=int(request.get("repeat", 1)),
            min_repeat_ms=int(request.get("min_repeat_ms", 0)),
        )
        self.device.sync()
        return {"run_secs": [float(x) for x in timer(*args).results]}

    def run(self, request: dict[str, Any]) -> dict[str, Any]:
        import numpy as np
        import tvm

        from tuning.catalog.dtypes import BF16_SUFFIX, BFLOAT16, numpy_dtype

        module = self.module(request["library"])
        args = []
        for name in request["inputs"]:
            array = np.load(self._path(name), allow_pickle=False)
            if name.endswith(BF16_SUFFIX):
                array = array.view(numpy_dtype(BFLOAT16))
            args.append(tvm.runtime.tensor(array, self.device))
        for param in request.get("packed", []):
            packed = tvm.runtime.empty(param["packed_shape"], param["dtype"], self.device)
            module[param["function"]](args[param["index"]], packed)
            args[param["index"]] = packed
        shape, dtype = request["out"]
        out = tvm.runtime.empty(shape, dtype, self.device)
        module[request.get("entry", "main")](*args, out)
        return {"output": base64.b64encode(out.numpy().tobytes()).decode()}

    def forget(self, request: dict[str, Any]) -> dict[str, Any]:
        self.modules.pop(request["library"], None)
        return {}


def _read(stream: BinaryIO) -> dict[str, Any] | None:
    header = stream.readline(32)
    if not header:
        return None
    length = int(header)
    if not 0 < length <= MAX_REQUEST_BYTES:
        raise ValueError(f"a request of {length} bytes")
    request = json.loads(stream.read(length))
    if not isinstance(request, dict):
        raise ValueError("a request is a JSON object")
    return request


def _write(fd: int, answer: dict[str, Any]) -> None:
    body = json.dumps(answer).encode()
    view = memoryview(FRAME + str(len(body)).encode() + b"\n" + body)
    while view:
        view = view[os.write(fd, view) :]


def _reason(err: BaseException) -> str:
    lines = [line.strip() for line in str(err).strip().splitlines() if line.strip()]
    return f"{type(err).__name__}: {lines[-1] if lines else ''}"[:2000]


def main() -> None:
    request_amx()  # a kernel on AMX tiles needs the tile state (False where there is none)
    answer_fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    config = json.loads(sys.stdin.buffer.readline())
    kernels = Kernels(Path(config["directory"]), config["kind"])
    handlers = {"time": kernels.time, "run": kernels.run, "forget": kernels.forget}
    _write(answer_fd, {"ok": True, "ready": True})
    while True:
        request = _read(sys.stdin.buffer)
        if request is None:
            break
        try:
            answer = {"ok": True, **handlers[request.pop("op")](request)}
        except Exception as err:  # noqa: BLE001 - any failure is the request's, not the runner's
            answer = {"ok": False, "error": _reason(err)}
        _write(answer_fd, answer)
    os._exit(0)
