"""`load_kernel`: a fetched schedule's library as a Python callable that runs at the speed
tunehub measured.

Calling a fetched library naively loses most of what was tuned: TVM sizes a process's thread
pool once, from ``TVM_NUM_THREADS`` or else *half* the CPUs of an x86 machine (it assumes every
core runs two hyper-threads), and a packed schedule's drop-in ``main`` repacks its weights on
every call. The worker measured the kernel on the target's ``num-cores`` threads, calling
``main_packed`` on weights packed once. A `Kernel` does what the worker did:

* it sizes TVM's thread pool to the target's ``num-cores`` (or ``threads=``) before its first
  kernel runs, in every thread that calls it; a pool TVM already started smaller cannot grow,
  which it reports with a `ThreadPoolWarning` saying why and what to do;
* it packs each constant weight once (`Kernel.bind`, or ``constants=``) with the library's
  ``pack_<i>`` and calls ``main_packed`` with the packed weights (``main`` when the schedule
  packs nothing);
* it takes numpy arrays, DLPack-capable arrays (PyTorch, JAX, CuPy...) or TVM tensors, checks
  each one's shape and dtype against the schedule's TIR (`KernelInputError` names the
  parameter), and returns the output (numpy for numpy inputs), allocated from the schedule's
  output shape and dtype, or written into ``out=``.

Inputs that are C-contiguous, 64-byte aligned and writable are passed without a copy; others
(numpy aligns big arrays to 16 bytes only) are copied into a tensor each calling thread keeps
per parameter. The output is TVM's own memory handed over as an array of the first input's
library (numpy's, through the Python array API's ``from_dlpack``; a numpy copy when no input
has an array namespace), or written into ``out=`` (aligned and contiguous).

TVM is imported when a kernel is loaded, not when this module is.
"""

from __future__ import annotations

import tempfile
import threading
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from service.client.cache import sha256_of
from service.client.http import TunehubClient
from service.client.thread_pool import (
    ThreadPoolWarning,
    machine_cpus,
    pin_threads,
    pinned_threads,
    threads_for,
)
from tuning.checks.library_check import check_library
from tuning.hardware.bf16 import request_amx

__all__ = [
    "Kernel",
    "KernelInputError",
    "ThreadPoolWarning",
    "load_kernel",
    "machine_cpus",
    "pin_threads",
]

PACKED_ENTRY = "main_packed"  # tuning.publish.packing's per-call kernel of a packed schedule


class KernelInputError(ValueError):
    """An argument a kernel cannot take: wrong count, shape, dtype or device; the message names
    the parameter (index and TIR name)."""


@dataclass(frozen=True)
class Operand:
    """One parameter of the library's ``main``, as the caller holds it (``None``: a dimension
    the TIR leaves symbolic)."""

    index: int
    name: str
    shape: tuple[int | None, ...]
    dtype: str

    def __str__(self) -> str:
        return f"parameter {self.index} ({self.name})"


@dataclass(frozen=True)
class Packing:
    """How the library packs one weight: ``function(weight, packed)`` fills ``packed_shape``."""

    function: str
    packed_shape: tuple[int, ...]
    dtype: str


# -- the schedule --------------------------------------------------------------------------------
def _field(schedule: Mapping[str, Any], *path: str) -> Any:
    """``schedule[path[0]][path[1]]...``, or a ValueError naming the missing field."""
    value: Any = schedule
    for i, key in enumerate(path):
        if not isinstance(value, Mapping) or key not in value:
            where = ".".join(path[: i + 1])
            raise ValueError(
                f"schedule {schedule.get('id', '?')}: no {where} (expected the JSON of "
                "GET /api/v1/schedules/{id}, as TunehubClient.schedule returns it)"
            )
        value = value[key]
    return value


def _operands(schedule: Mapping[str, Any]) -> list[Operand]:
    """``main``'s parameters (inputs then the output), read off the schedule's TIR."""
    import tvm

    tir = _field(schedule, "tir")
    try:
        parsed = tvm.script.from_source(tir)
    except Exception as err:  # noqa: BLE001 - the parser raises many kinds; say which field
        raise ValueError(f"schedule {schedule.get('id', '?')}: tir does not parse: {err}") from err
    func = parsed["main"] if isinstance(parsed, tvm.IRModule) else parsed
    operands = []
    for index, param in enumerate(func.params):
        buffer = func.buffer_map[param] if hasattr(func, "buffer_map") else param
        shape = tuple(int(d) if isinstance(d, tvm.tirx.IntImm) else None for d in buffer.shape)
        operands.append(Operand(index, str(buffer.name), shape, str(buffer.dtype)))
    if len(operands) < 2:
        raise ValueError(f"schedule {schedule.get('id', '?')}: main takes no input and output")
    return operands


def _packings(schedule: Mapping[str, Any], inputs: int) -> dict[int, Packing]:
    """Parameter index -> its packing, from the schedule's ``packed_params``."""
    found: dict[int, Packing] = {}
    for item in _field(schedule, "packed_params"):
        try:
            index, function = item["index"], item["function"]
            packed_shape = tuple(int(d) for d in item["packed_shape"])
            dtype = str(item["dtype"])
        except (TypeError, KeyError, ValueError) as err:
            raise ValueError(
                f"schedule {schedule.get('id', '?')}: bad packed_params entry {item!r}"
            ) from err
        if not isinstance(index, int) or not 0 <= index < inputs or not isinstance(function, str):
            raise ValueError(
                f"schedule {schedule.get('id', '?')}: bad packed_params entry {item!r}"
            )
        found[index] = Packing(function, packed_shape, dtype)
    return found


def _device(canonical: Mapping[str, Any]) -> Any:
    """The local device a library of this target runs on."""
    import tvm

    kind = canonical.get("kind")
    if kind == "llvm":
        return tvm.cpu(0)
    if kind == "cuda":
        return tvm.cuda(0)
    raise ValueError(f"target.canonical.kind: cannot run a library of kind {kind!r} here")


# -- the kernel ------------------------------------------------------------------------------------
class Kernel:
    """A loaded schedule: ``kernel(*inputs, out=None)`` runs it on the inputs not bound as
    constants (in ``main``'s parameter order) and returns the output (a numpy array, or
    ``out``). Safe to call from several threads; each gets its pool sized on first use."""

    def __init__(
        self,
        module: Any,
        device: Any,
        operands: list[Operand],
        packings: dict[int, Packing],
        threads: int | None,
        schedule_id: int | None = None,
    ) -> None:
        self.module = module
        self.device = device
        self.params = tuple(operands[:-1])  # the inputs, in main's order
        self.output = operands[-1]
        self.packings = packings
        self.threads = threads  # None: not a CPU kernel
        self.schedule_id = schedule_id
        self.entry = PACKED_ENTRY if packings else "main"
        missing = [f for f in (self.entry, *(p.function for p in packings.values()))
                   if not module.implements_function(f)]  # fmt: skip
        if missing:
            raise ValueError(f"{self}: the library has no {', '.join(missing)}")
        self._function = module[self.entry]
        self._constants: dict[int, Any] = {}  # index -> the tensor main's entry takes
        self._warned_packing: set[int] = set()
        self._stages = threading.local()  # .tensors: operand index -> this thread's copy target
        self._on_cpu = device.dlpack_device_type() == 1  # kDLCPU
        self._ensure_threads()  # before the library's first kernel (a pack function) runs

    def __repr__(self) -> str:
        return f"Kernel(schedule {self.schedule_id}, {self.entry}, threads={self.threads})"

    @property
    def inputs(self) -> tuple[Operand, ...]:
        """What a call takes: the parameters not bound as constants, in order."""
        return tuple(p for p in self.params if p.index not in self._constants)

    @property
    def constants(self) -> Mapping[int, Any]:
        """Parameter index -> the bound tensor (packed where the schedule packs it)."""
        return dict(self._constants)

    def bind(self, param: int | str, value: Any) -> Kernel:
        """Hold ``value`` as parameter ``param`` (index or TIR name) for every later call:
        copied once, and packed once with the library's ``pack_<i>`` where the schedule packs
        it. Later changes to the caller's array are not seen. Returns the kernel."""
        operand = self._param(param)
        self._ensure_threads()
        tensor = self._tensor(operand, value, copy=True)
        self._constants[operand.index] = self._packed(operand, tensor)
        return self

    def __call__(self, *inputs: Any, out: Any = None) -> Any:
        """Run the kernel on ``inputs`` (`inputs` lists them) and return the output: a new
        array (numpy for numpy inputs, see the module's notes), or ``out`` filled in place.
        Raises `KernelInputError` for a bad argument."""
        free = self.inputs
        if len(inputs) != len(free):
            names = ", ".join(p.name for p in free) or "none"
            raise KernelInputError(
                f"{self} takes {len(free)} input(s) ({names}), got {len(inputs)}"
            )
        self._ensure_threads()
        result = self._out_tensor(out)
        args: list[Any] = [None] * len(self.params)
        for index, tensor in self._constants.items():
            args[index] = tensor
        for operand, value in zip(free, inputs, strict=True):
            tensor = self._tensor(operand, value, copy=False)
            if operand.index in self.packings:
                self._warn_packing_per_call(operand)
                tensor = self._packed(operand, tensor)
            args[operand.index] = tensor
        self._function(*args, result)
        if out is not None:
            return out
        namespace = _namespace(inputs) if self._on_cpu else None
        return namespace.from_dlpack(result) if namespace is not None else result.numpy()

    # -- helpers ---------------------------------------------------------------------------
    def _ensure_threads(self) -> None:
        if self.threads is not None and pinned_threads() != self.threads:
            pin_threads(self.threads)

    def _param(self, param: int | str) -> Operand:
        for operand in self.params:
            if param == operand.index or param == operand.name:
                return operand
        names = ", ".join(f"{p.index} ({p.name})" for p in self.params)
        raise KernelInputError(f"{self}: no input parameter {param!r} (inputs: {names})")

    def _tensor(self, operand: Operand, value: Any, copy: bool) -> Any:
        """``value`` as a TVM tensor on the kernel's device, checked against ``operand``: its own
        memory where TVM can run on it as is, else copied into this thread's staging tensor of
        the operand; a new tensor of its own when ``copy`` (what `bind` keeps)."""
        import tvm

        tensor = value if isinstance(value, tvm.runtime.Tensor) else None
        if tensor is None and not copy:
            tensor = _shared(value)
        static = None not in operand.shape
        if tensor is None and not copy and static and hasattr(value, "__array_interface__"):
            self._check(operand, tuple(value.shape), str(value.dtype))
            return self._stage(operand).copyfrom(value)
        if tensor is None:
            try:
                tensor = tvm.runtime.tensor(value, self.device)
            except Exception as err:  # noqa: BLE001 - numpy/TVM raise many kinds
                raise KernelInputError(f"{operand}: not an array TVM can take: {err}") from err
        self._check(operand, tuple(tensor.shape), str(tensor.dtype))
        if tensor.device != self.device or (copy and tensor is value):
            tensor = tensor.copyto(self.device)
        return tensor

    def _stage(self, operand: Operand) -> Any:
        """This thread's tensor for copies of ``operand`` (allocated once per thread)."""
        import tvm

        stages: dict[int, Any] | None = getattr(self._stages, "tensors", None)
        if stages is None:
            stages = self._stages.tensors = {}
        stage = stages.get(operand.index)
        if stage is None:
            stage = stages[operand.index] = tvm.runtime.empty(
                operand.shape, operand.dtype, self.device
            )
        return stage

    def _check(self, operand: Operand, shape: tuple[int, ...], dtype: str) -> None:
        fits = len(shape) == len(operand.shape) and all(
            want is None or want == got for want, got in zip(operand.shape, shape, strict=True)
        )
        if not fits or dtype != operand.dtype:
            expected = tuple("?" if d is None else d for d in operand.shape)
            raise KernelInputError(
                f"{self}: {operand} is {dtype}{list(shape)}, expected {operand.dtype}"
                f"{list(expected)}"
            )

    def _packed(self, operand: Operand, tensor: Any) -> Any:
        """The weight in the layout ``main_packed`` takes (itself where nothing packs it)."""
        import tvm

        packing = self.packings.get(operand.index)
        if packing is None:
            return tensor
        packed = tvm.runtime.empty(packing.packed_shape, packing.dtype, self.device)
        self.module[packing.function](tensor, packed)
        return packed

    def _warn_packing_per_call(self, operand: Operand) -> None:
        if operand.index not in self._warned_packing:
            self._warned_packing.add(operand.index)
            warnings.warn(
                f"{self}: {operand} is packed on every call; kernel.bind({operand.index}, "
                "weight) packs it once, as the schedule was measured",
                RuntimeWarning,
                stacklevel=3,
            )

    def _out_tensor(self, out: Any) -> Any:
        import tvm

        if out is None:
            if None in self.output.shape:
                raise KernelInputError(
                    f"{self}: the output {self.output.name} has a symbolic shape; pass out="
                )
            return tvm.runtime.empty(self.output.shape, self.output.dtype, self.device)
        try:
            tensor = out if isinstance(out, tvm.runtime.Tensor) else tvm.runtime.from_dlpack(out)
        except (RuntimeError, BufferError, TypeError, ValueError) as err:
            raise KernelInputError(
                f"{self}: out= must be a writable, C-contiguous, 64-byte aligned array on "
                f"{self.device} (the kernel writes into it without a copy): {err}"
            ) from err
        self._check(self.output, tuple(tensor.shape), str(tensor.dtype))
        if tensor.device != self.device:
            raise KernelInputError(f"{self}: out= is on {tensor.device}, not {self.device}")
        return tensor


def _shared(value: Any) -> Any:
    """``value`` as a TVM tensor over its own memory, or None where TVM cannot run on that:
    not 64-byte aligned, not C-contiguous or read-only (numpy arrays are checked first, since a
    refused DLPack export costs more than the check)."""
    import tvm

    interface = getattr(value, "__array_interface__", None)
    if interface is not None:
        pointer, readonly = interface["data"]
        if readonly or pointer % 64 or interface.get("strides") is not None:
            return None
    elif not hasattr(value, "__dlpack__"):
        return None
    try:
        return tvm.runtime.from_dlpack(value)
    except (RuntimeError, BufferError, TypeError, ValueError):
        return None


def _namespace(inputs: tuple[Any, ...]) -> Any:
    """The array namespace (Python array API) of the first input that has one: numpy's for
    numpy arrays. The output is returned as its array, over TVM's memory (no copy)."""
    for value in inputs:
        get = getattr(value, "__array_namespace__", None)
        if get is not None:
            namespace = get()
            if hasattr(namespace, "from_dlpack"):
                return namespace
    return None


# -- loading -----------------------------------------------------------------------------------
def _schedule_json(schedule: Mapping[str, Any] | int, client: TunehubClient | None) -> Any:
    """The schedule's detail JSON (with its TIR), fetched when ``schedule`` is an id or a
    list entry."""
    if isinstance(schedule, Mapping) and "tir" in schedule:
        return schedule
    if isinstance(schedule, bool) or not isinstance(schedule, (int, Mapping)):
        raise TypeError(f"schedule: a schedule id or its JSON, not {type(schedule).__name__}")
    schedule_id = schedule if isinstance(schedule, int) else _field(schedule, "id")
    if client is not None:
        return client.schedule(schedule_id)
    with TunehubClient() as own:
        return own.schedule(schedule_id)


def _load_library(
    schedule: Mapping[str, Any], library: str | Path | None, client: TunehubClient | None
) -> Any:
    """The schedule's library, loaded: ``library`` (checked against the artifact's sha256),
    else downloaded into a temporary folder that is removed once it is loaded."""
    import tvm

    request_amx()  # a kernel on AMX tiles needs the tile state
    announced = _field(schedule, "artifact", "sha256")
    if library is not None:
        path = Path(library)
        if not path.is_file():
            raise ValueError(f"library: no file {path}")
        if sha256_of(path) != announced:
            raise ValueError(
                f"library: {path} is not schedule {schedule.get('id', '?')}'s artifact "
                f"(sha256 {sha256_of(path)}, announced {announced})"
            )
        check_library(path)  # what runs on load (a constructor) is refused before it runs
        return tvm.runtime.load_module(str(path))
    with tempfile.TemporaryDirectory(prefix="tunehub-kernel-") as folder:
        path = Path(folder) / f"{announced}.so"
        if client is not None:
            client.download_artifact(_field(schedule, "id"), path)
        else:
            with TunehubClient() as own:
                own.download_artifact(_field(schedule, "id"), path)  # checked as downloaded
        return tvm.runtime.load_module(str(path))


def load_kernel(
    schedule: Mapping[str, Any] | int,
    library: str | Path | None = None,
    *,
    client: TunehubClient | None = None,
    constants: Mapping[int | str, Any] | None = None,
    threads: int | None = None,
) -> Kernel:
    """A fetched schedule as a `Kernel`, ready to run at the speed tunehub measured.

    ``schedule``: a schedule id, or its JSON (``TunehubClient.schedule``; a list entry without
    TIR is fetched again). ``library``: its downloaded artifact (checked against the announced
    sha256); None downloads it. ``client``: the server to ask (default: ``TUNEHUB_URL``).
    ``constants``: parameter (index or TIR name) -> weight, bound (packed) once, as
    `Kernel.bind`. ``threads``: overrides the target's ``num-cores`` (CPU targets).

    The calling thread's TVM pool is sized before anything runs (`pin_threads`): call this
    before other TVM code in the thread, or get a `ThreadPoolWarning`. Raises ValueError (a
    `KernelInputError` for a weight) naming the field or parameter at fault."""
    detail = _schedule_json(schedule, client)
    canonical = _field(detail, "target", "canonical")
    count = threads_for(canonical, threads)
    device = _device(canonical)
    operands = _operands(detail)
    packings = _packings(detail, len(operands) - 1)
    module = _load_library(detail, library, client)
    kernel = Kernel(module, device, operands, packings, count, detail.get("id"))
    for param, value in (constants or {}).items():
        kernel.bind(param, value)
    return kernel
