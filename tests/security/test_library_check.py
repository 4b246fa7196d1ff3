"""A compiled library is checked before anything loads it: what a kernel never needs and a
payload does (a constructor, an indirect function's resolver, a search path, a call to
``system``) is refused; what tunehub's own export writes passes."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.security.payloads import probe_library, probe_module
from tuning.checks.library_check import (
    LINK_OPTIONS,
    UnsafeLibrary,
    check_library,
    check_library_bytes,
    export_library,
)


def _compiled(script_module: object) -> object:
    import tvm

    return tvm.compile(script_module, target="llvm")


def test_a_kernel_exported_by_tunehub_passes(tmp_path: Path) -> None:
    from tuning.catalog import get_operator
    from tuning.catalog.workload import catalog_workload

    for name, params in [("matmul", {"M": 8, "N": 8, "K": 8}), ("softmax", {"rows": 2, "cols": 8})]:
        spec = catalog_workload(name, get_operator(name).Params(**params))
        export_library(_compiled(spec.mod), tmp_path / f"{name}.so")  # checks it


@pytest.mark.parametrize("options", [[], LINK_OPTIONS], ids=["start-files", "no-start-files"])
def test_the_probes_library_is_refused_and_its_constructor_never_runs(
    tmp_path: Path, options: list[str]
) -> None:
    marker = tmp_path / "marker"
    library = probe_library(marker, tmp_path / "probe.so", options)
    with pytest.raises(UnsafeLibrary, match="DT_INIT"):
        check_library(library)
    assert not marker.exists()


def test_a_call_to_system_is_refused(tmp_path: Path) -> None:
    import tvm
    from tvm.script import tirx as T

    @T.prim_func
    def calls_system(a: T.Buffer((4,), "int32")) -> None:
        for i in range(4):
            a[i] = T.call_extern("int32", "system", T.int32(0))

    path = tmp_path / "system.so"
    _compiled(tvm.IRModule({"main": calls_system})).export_library(str(path), options=LINK_OPTIONS)
    with pytest.raises(UnsafeLibrary, match="'system'"):
        check_library(path)


def _asm_library(tmp_path: Path, lines: list[str], options: list[str]) -> Path:
    """A kernel linked with these lines of module-level assembly (the probe's channel)."""
    from tvm.s_tir.schedule import Schedule

    sch = Schedule(probe_module())
    (loop,) = sch.get_loops(sch.get_sblock("B"))
    text = "\n".join(f'module asm "{line}"' for line in lines) + "\n"
    sch.annotate(loop, "pragma_import_llvm", text)
    path = tmp_path / "asm.so"
    _compiled(sch.mod).export_library(str(path), options=options)
    return path


def test_an_indirect_function_is_refused(tmp_path: Path) -> None:
    # Its resolver runs while the dynamic linker relocates the library: code run on load.
    lines = [".text", ".globl probe_ifunc", ".type probe_ifunc, @gnu_indirect_function",
             "probe_ifunc:", "  ret"]  # fmt: skip
    with pytest.raises(UnsafeLibrary, match="indirect function"):
        check_library(_asm_library(tmp_path, lines, LINK_OPTIONS))


def test_a_library_search_path_is_refused(tmp_path: Path) -> None:
    path = _asm_library(tmp_path, [".text"], [*LINK_OPTIONS, "-Wl,-rpath,/tmp/elsewhere"])
    with pytest.raises(UnsafeLibrary, match="DT_RUNPATH|DT_RPATH"):
        check_library(path)


@pytest.mark.parametrize(
    "data",
    [b"", b"\x7fELF", b"MZ" + b"\0" * 100, b"\x7fELF\x01\x01" + b"\0" * 100],
    ids=["empty", "truncated", "not-elf", "32-bit"],
)
def test_malformed_files_are_refused(data: bytes) -> None:
    with pytest.raises(UnsafeLibrary):
        check_library_bytes(data)


def test_an_executable_and_cut_library_are_refused(tmp_path: Path) -> None:
    with pytest.raises(UnsafeLibrary):
        check_library(Path("/usr/bin/true"))
    good = export_library(_compiled(probe_module()), tmp_path / "good.so")
    data = good.read_bytes()
    for cut in (64, len(data) // 2, len(data) - 64):
        with pytest.raises(UnsafeLibrary):
            check_library_bytes(data[:cut])
