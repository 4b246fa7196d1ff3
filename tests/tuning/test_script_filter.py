"""The syntax filter's allow-list of attribute chains (issue 25, finding 3): the probe reached
``builtins.exec`` through ``I.entry.inspect`` and ran Python in the parse child; every chain is
now one TVMScript offers, and the allow-list is the pinned TVM's own (regenerated here)."""

from __future__ import annotations

import types

import pytest

from tests.tuning.catalog_cases import CASES
from tuning.catalog import get_operator
from tuning.catalog.workload import catalog_workload
from tuning.checks.tvmscript_names import NAMESPACES
from tuning.untrusted.user_model import ModelRejected, check_relax_syntax
from tuning.untrusted.user_tir import TirRejected, check_syntax

PROBE = 'I.entry.inspect.builtins.exec("import os; os.getcwd()")'


def _tir(extent: str) -> str:
    """A copying function whose loop extent is ``extent`` (Python the parser evaluates)."""
    return f"""
@T.prim_func(s_tir=True)
def main(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32")):
    for i in range({extent}):
        with T.sblock("b"):
            vi = T.axis.spatial(4, i)
            B[vi] = A[vi] * T.float32(2)
"""


def _relax(expression: str) -> str:
    return f"""
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((4,), "float32")) -> R.Tensor((4,), "float32"):
        cls = Module
        y = {expression}
        return y
"""


def test_the_allow_list_is_the_pinned_tvms_and_holds_no_module() -> None:
    """Regenerated from TVM's parser namespaces; a TVM upgrade that adds or removes a name
    (or turns one into a module) fails here until `tuning/checks/tvmscript_names.py` is
    regenerated and reviewed."""
    from tvm.script.parser.core.entry import _default_globals

    parser = _default_globals()
    backends = {"cuda", "ptx", "ptx_legacy", "metal", "nki", "nvshmem", "webgpu", "s_tir",
                "cluster", "cta", "thread", "warp", "warpgroup", "wg"}  # fmt: skip
    for path, names in NAMESPACES.items():
        excluded = {"TYPE_CHECKING"} | (backends if path == "T" else set())
        root, *rest = path.split(".")
        namespace = parser[root]
        for part in rest:
            namespace = getattr(namespace, part)
        public = {
            name
            for name in dir(namespace)
            if not name.startswith("_")
            and name not in excluded
            and not isinstance(getattr(namespace, name), types.ModuleType)
        }
        assert names == public, path
        assert not any(isinstance(getattr(namespace, n), types.ModuleType) for n in names)
    assert "entry" not in NAMESPACES["I"] and "vm" not in NAMESPACES["R"]


@pytest.mark.parametrize(
    "extent",
    [
        f"4 + ({PROBE} or 0)",  # the probe's payload
        "4 + len(T.ir.__name__)",
        "4 + (T.prim_func.func_globals or 0)",  # no attribute of a function object
        "4 + ('x'.join(['']) and 0)",  # no attribute of a literal
        "4 + int.from_bytes(b'', 'big')",  # no attribute of a builtin
        "4 + (T.Buffer((1,), 'float32').shape[0] - 1)",  # no attribute of a call's result
        "4 + T.axis.spatial.name",  # no chain deeper than a namespace
        "4 + (A.data.name and 0)",  # a bound name: one level, a buffer's attributes only
        "4 + (A.entry and 0)",
    ],
)
def test_attribute_chains_beyond_tvmscripts_are_refused(extent: str) -> None:
    with pytest.raises(TirRejected, match="not one TVMScript offers|not allowed"):
        check_syntax(_tir(extent))


@pytest.mark.parametrize(
    "expression",
    [
        f"R.add(x, x) if ({PROBE} or 1) else x",
        "R.vm.alloc_storage(R.shape([16]), 0, 'float32')",  # refused later too; here first
        "R.memory.alloc_storage(R.shape([16]), 0, 'global', 'float32')",
        "cls.entry",  # the module's class names its own functions only
        "R.nn.relu.__globals__",
    ],
)
def test_relax_chains_beyond_tvmscripts_are_refused(expression: str) -> None:
    with pytest.raises(ModelRejected, match="not one TVMScript offers|not allowed"):
        check_relax_syntax(_relax(expression))


def test_tvmscript_as_tvm_prints_it_passes() -> None:
    """Every catalog operator's TIR, a function reading a buffer's shape, and Relax with
    ``cls``, ``R.nn`` and ``T.axis`` pass the filter."""
    for name, params in CASES:
        script = catalog_workload(name, get_operator(name).Params(**params)).mod.script()
        check_syntax(script)
    check_syntax(_tir("A.shape[0]"))
    check_relax_syntax(_relax("R.nn.relu(R.add(x, x))"))
    module_with_call = _relax("R.call_tir(cls.double, (x,), out_sinfo=R.Tensor((4,), 'float32'))")
    module_with_call = module_with_call.replace(
        "    @R.function",
        _tir("4").replace("\n", "\n    ").replace("def main", "def double") + "\n    @R.function",
        1,
    )
    check_relax_syntax(module_with_call)
