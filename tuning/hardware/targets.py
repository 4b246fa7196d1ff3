"""Hardware targets: resolving a job's target spec to a canonical TVM target (what this host is
lives in `tuning.hardware.host`)."""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from typing import Any

from tuning.hardware.host import host_target_spec

HOST = "host"


class TargetError(ValueError):
    """A target spec that tunehub refuses: a kind it does not tune and serve, a name the installed
    TVM/LLVM does not know, a count out of range, or anything TVM itself rejects.

    ``loc`` is the path of the offending attribute inside the target (``("mcpu",)``,
    ``("host", "mattr", 0)``), empty when the target as a whole is wrong."""

    def __init__(self, message: str, loc: tuple[str | int, ...] = ()) -> None:
        super().__init__(message)
        self.loc = loc


@dataclass(frozen=True)
class ResolvedTarget:
    """A target as tunehub keys it: TVM's exported dict with sorted keys, a kind and a label."""

    canonical: dict[str, Any]
    kind: str
    label: str

    def tvm(self) -> Any:
        """The `tvm.target.Target` of this canonical dict."""
        from tvm.target import Target

        return Target(self.canonical)


def _jsonable(value: Any) -> Any:
    """Plain JSON values from TVM's exported target (FFI arrays and maps included). The
    ``hasattr`` probes ask TVM's FFI objects what they are (a Target, a Map, an Array): their
    Python classes differ between TVM builds, their methods do not."""
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if hasattr(value, "export"):  # a nested Target (e.g. "host" of a cuda target)
        return _jsonable(dict(value.export()))
    if hasattr(value, "items"):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if hasattr(value, "__len__") and hasattr(value, "__getitem__"):
        return [_jsonable(v) for v in value]
    return str(value)


SUPPORTED_KINDS = ("llvm", "cuda")  # what a worker tunes and a build gets a library for
REFUSED_ATTRIBUTES = {
    "from_device": "reads the GPU of whichever process parses the target, so the same JSON "
    "would mean different targets on different hosts; name the arch instead",
    "cl-opt": "sets LLVM's process-wide command-line options in the service and its workers",
}
POSITIVE_ATTRIBUTES = {  # counts and sizes: below 1 describes no hardware
    "llvm": ("num-cores", "vector-width"),
    "cuda": (
        "max_num_threads",
        "thread_warp_size",
        "max_threads_per_block",
        "max_shared_memory_per_block",
        "registers_per_block",
        "l2_cache_size_bytes",
    ),
}
MAX_NUM_CORES = 4096  # a kernel's thread pool is sized by it (tuning.hardware.threads)
OPT_LEVELS = range(4)  # LLVM's -O0..-O3
MAX_MATTR = 64
MIN_CUDA_ARCH = 50  # sm_50: the oldest arch CUDA 12 still builds for, and TVM's default
NVPTX_TRIPLE = "nvptx64-nvidia-cuda"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")  # mcpu, mtriple, arch
_FEATURE = re.compile(r"[+-]([A-Za-z0-9][A-Za-z0-9_.-]{0,63})")  # one mattr entry
_CUDA_ARCH = re.compile(r"sm_(\d+)([a-z]?)")  # sm_80, sm_90a, sm_100f


def _shown(value: Any) -> str:
    """A user value in an error message, cut short."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _check_names(spec: dict[str, Any], loc: tuple[str | int, ...] = ()) -> None:
    """Kind, refused attributes and the spelling of every name, before TVM or LLVM sees them
    (LLVM crashes on some unknown triples; odd strings never reach it)."""
    kind = spec.get("kind")
    if kind not in SUPPORTED_KINDS:
        raise TargetError(
            f"target kind {_shown(kind)} is not one tunehub tunes and serves "
            f"(one of {', '.join(SUPPORTED_KINDS)})",
            (*loc, "kind"),
        )
    for name, why in REFUSED_ATTRIBUTES.items():
        if name in spec:
            raise TargetError(f"{name!r} is not accepted: it {why}", (*loc, name))
    for name in ("mcpu", "mtriple", "arch"):
        value = spec.get(name)
        if value is not None and not (isinstance(value, str) and _NAME.fullmatch(value)):
            raise TargetError(
                f"{name} must be a name of letters, digits, '_', '.' and '-', not {_shown(value)}",
                (*loc, name),
            )
    if kind == "cuda":
        if "arch" not in spec:  # TVM would take the parsing host's GPU, or sm_50 without one
            raise TargetError(
                "a cuda target names its arch (e.g. sm_80): the service parses it on a host "
                "that may have another GPU or none",
                (*loc, "arch"),
            )
        for name in ("arch", "mcpu"):
            if name in spec and spec[name] not in cuda_archs():
                raise TargetError(
                    f"{name} {_shown(spec[name])} is not a CUDA arch the installed TVM/LLVM "
                    f"knows (sm_{MIN_CUDA_ARCH} and newer: {', '.join(cuda_archs())})",
                    (*loc, name),
                )
    mattr = spec.get("mattr")
    if mattr is not None:
        if not isinstance(mattr, list) or len(mattr) > MAX_MATTR:
            raise TargetError(
                f"mattr must be a list of at most {MAX_MATTR} features", (*loc, "mattr")
            )
        for index, feature in enumerate(mattr):
            if not (isinstance(feature, str) and _FEATURE.fullmatch(feature)):
                raise TargetError(
                    f"mattr entries are '+feature' or '-feature', not {_shown(feature)}",
                    (*loc, "mattr", index),
                )
    host = spec.get("host")
    if host is not None:
        if loc or not isinstance(host, dict) or host.get("kind") != "llvm":
            raise TargetError("host must be an llvm target (without a host)", (*loc, "host"))
        _check_names(host, ("host",))


def _check_known(canonical: dict[str, Any], loc: tuple[str | int, ...] = ()) -> None:
    """Every LLVM name in TVM's canonical target is one the installed LLVM knows, and every
    count is in range (checked on the canonical dict: TVM fills in defaults such as mtriple)."""
    kind = canonical["kind"]
    for name in POSITIVE_ATTRIBUTES[kind]:
        value = canonical.get(name)
        if value is not None and value < 1:
            raise TargetError(f"{name} must be at least 1, not {value}", (*loc, name))
    if canonical.get("num-cores", 1) > MAX_NUM_CORES:
        raise TargetError(f"num-cores must be at most {MAX_NUM_CORES}", (*loc, "num-cores"))
    if canonical.get("opt-level", 0) not in OPT_LEVELS:
        raise TargetError("opt-level must be 0, 1, 2 or 3", (*loc, "opt-level"))
    if kind == "llvm":
        _check_llvm_names(canonical, loc)
    if isinstance(canonical.get("host"), dict):
        _check_known(canonical["host"], ("host",))


def _check_llvm_names(canonical: dict[str, Any], loc: tuple[str | int, ...]) -> None:
    from tvm.target.codegen import llvm_get_system_triple, llvm_version_major

    llvm = f"LLVM {llvm_version_major()} (as TVM ships it)"
    triple = canonical.get("mtriple") or str(llvm_get_system_triple())
    if not _llvm_knows_triple(triple):
        raise TargetError(
            f"mtriple {_shown(triple)} is not a triple {llvm} generates CPU code for",
            (*loc, "mtriple"),
        )
    cpu = canonical.get("mcpu")
    if cpu is not None and not _llvm_knows_cpu(cpu, triple):
        hint = "" if "mtriple" in canonical else " (for another architecture, name its mtriple)"
        raise TargetError(
            f"mcpu {_shown(cpu)} is not a CPU {llvm} knows for {triple}{hint}", (*loc, "mcpu")
        )
    for index, attr in enumerate(canonical.get("mattr", [])):
        if not _llvm_knows_feature(str(attr)[1:], triple):
            raise TargetError(
                f"mattr {_shown(attr)}: {llvm} knows no feature {str(attr)[1:]!r} for {triple}",
                (*loc, "mattr", index),
            )


@functools.lru_cache(maxsize=256)
def _llvm_knows_triple(triple: str) -> bool:
    """True when LLVM has a backend with a ``generic`` CPU for this triple (no GPU ISA has one)."""
    from tvm.target.codegen import llvm_is_valid_cpu

    return bool(llvm_is_valid_cpu("generic", triple))


@functools.lru_cache(maxsize=1024)
def _llvm_knows_cpu(cpu: str, triple: str) -> bool:
    from tvm.target.codegen import llvm_is_valid_cpu

    return bool(llvm_is_valid_cpu(cpu, triple))


@functools.lru_cache(maxsize=1024)
def _llvm_knows_feature(feature: str, triple: str) -> bool:
    """True when switching ``feature`` on for ``triple`` takes effect (LLVM ignores, with a
    warning on stderr, a feature it does not know)."""
    from tvm.target import Target
    from tvm.target.codegen import llvm_cpu_has_features

    target = Target({"kind": "llvm", "mtriple": triple, "mattr": [f"+{feature}"]})
    return bool(llvm_cpu_has_features(feature, target))


@functools.cache
def cuda_archs() -> tuple[str, ...]:
    """The CUDA archs a cuda target may name, oldest first: the NVPTX processors of the LLVM
    that TVM ships (``sm_90a``, ``sm_100f`` included), from sm_50 on."""
    from tvm.target import Target
    from tvm.target.codegen import llvm_get_cpu_archlist, llvm_get_targets

    if "nvptx64" in llvm_get_targets():  # the archlist of a triple LLVM lacks segfaults
        nvptx = Target({"kind": "llvm", "mtriple": NVPTX_TRIPLE})
        names = [str(name) for name in llvm_get_cpu_archlist(nvptx)]
    else:  # an LLVM built without NVPTX: every sm_XX from sm_50 to sm_129, any suffix
        names = [f"sm_{n}{s}" for n in range(MIN_CUDA_ARCH, 130) for s in ("", "a", "f")]
    numbered = {name: int(m.group(1)) for name in names if (m := _CUDA_ARCH.fullmatch(name))}
    wanted = [name for name, number in numbered.items() if number >= MIN_CUDA_ARCH]
    return tuple(sorted(wanted, key=lambda name: (numbered[name], name)))


def _label(canonical: dict[str, Any]) -> str:
    kind = canonical["kind"]
    if kind == "llvm":
        cpu = canonical.get("mcpu") or "generic"
        for attr in canonical.get("mattr", []):  # "-avx512f" -> "-no-avx512f"
            cpu += f"-no-{attr[1:]}" if str(attr).startswith("-") else f"-{str(attr).lstrip('+')}"
        cores = canonical.get("num-cores")
        return f"{cpu}-{cores}c" if cores else cpu
    if kind == "cuda":
        return f"cuda-{canonical.get('arch') or 'generic'}"
    return kind


def resolve_target(spec: str | dict[str, Any]) -> ResolvedTarget:
    """Resolve ``"host"``, a JSON object, or a JSON object's text to a canonical target.

    Raises `TargetError` with a readable reason (and the attribute's ``loc``) for anything
    tunehub refuses: a kind other than llvm and cuda; ``from_device`` or ``cl-opt``; an
    ``mtriple``, ``mcpu`` or ``mattr`` feature the installed LLVM does not know (an mcpu is
    checked against the mtriple, or this host's triple without one); a cuda target without an
    ``arch`` or with one outside `cuda_archs`; ``num-cores`` outside 1..4096 or another count
    below 1; and anything TVM rejects. CLI strings such as ``"llvm -mcpu=znver4"`` are
    rejected by TVM 0.27, so they are rejected here too, with a hint. Only names are checked:
    a cuda target resolves on a host without a GPU.
    """
    from tvm.target import Target

    if isinstance(spec, str):
        if spec == HOST:
            spec = host_target_spec()
        else:
            try:
                spec = json.loads(spec)
            except (json.JSONDecodeError, RecursionError):
                raise TargetError(
                    f"target {_shown(spec)} is neither 'host' nor a JSON object; TVM 0.27 takes "
                    'targets as JSON, e.g. {"kind": "llvm", "mcpu": "znver4"}'
                ) from None
    if not isinstance(spec, dict) or not isinstance(spec.get("kind"), str):
        raise TargetError('a target must be "host" or a JSON object with a string "kind"')
    _check_names(spec)
    try:
        target = Target(spec)
    except Exception as err:  # TVM raises ValueError / TVMError with a readable message
        raise TargetError(str(err).strip().splitlines()[0]) from None
    canonical = _jsonable(dict(target.export()))
    canonical = {k: v for k, v in sorted(canonical.items()) if v not in ("", [], {}, None)}
    _check_known(canonical)
    return ResolvedTarget(canonical=canonical, kind=canonical["kind"], label=_label(canonical))


def device_for(kind: str) -> Any:
    """The TVM device that runs code for a target kind."""
    import tvm

    if kind == "llvm":
        return tvm.cpu(0)
    if kind == "cuda":
        return tvm.cuda(0)
    if kind == "rocm":
        return tvm.rocm(0)
    raise TargetError(f"no local device for target kind {kind!r}")
