"""The allowlist and bounds proofs that every user function passes before it is stored, built
or run (`tuning.checks.tir_checks`), on real TVMScript."""

from __future__ import annotations

import pytest

from tests.tuning.catalog_cases import CASES, case_id
from tuning.catalog import get_operator
from tuning.catalog.workload import catalog_workload
from tuning.checks.tir_checks import UnsafeTir, check_user_function


def _func(body: str, params: str = 'A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")'):
    from tvm.script.parser.core.entry import parse

    lines = "\n".join("    " + line for line in body.strip("\n").splitlines())
    return parse(f"@T.prim_func(s_tir=True)\ndef main({params}):\n{lines}\n")


COPY = """
for i in range(8):
    with T.sblock("b"):
        vi = T.axis.spatial(8, i)
        B[vi] = {value}
"""


@pytest.mark.parametrize(
    "value",
    [
        "A[vi]",
        "T.exp(A[vi]) + T.sqrt(T.max(A[vi], T.float32(0)))",
        "T.if_then_else(vi > 0, A[vi - 1], T.float32(0))",  # guarded: proved in bounds
        "T.sigmoid(T.tanh(T.erf(A[vi])))",
    ],
)
def test_kernels_with_arithmetic_and_guarded_reads_pass(value: str) -> None:
    check_user_function(_func(COPY.format(value=value)))


@pytest.mark.parametrize(
    "value, reason",
    [
        ("A[vi + 1]", "cannot prove"),  # reads one past the end
        ("A[vi * 2]", "cannot prove"),
        ("T.Select(vi > 0, A[vi - 1], T.float32(0))", "cannot prove"),  # Select reads both arms
        ('T.call_extern("float32", "system", "touch /tmp/owned")', "tirx.call_extern"),
        ('T.call_pure_extern("float32", "expf", A[vi])', "tirx.call_pure_extern"),
        ('T.call_packed("tunehub.anything", A[vi])', "not allowed"),
        ('T.call_llvm_pure_intrin("float32", "llvm.exp.f32", A[vi])', "not allowed"),
    ],
)
def test_calls_outside_the_allowlist_and_unprovable_reads_are_refused(
    value: str, reason: str
) -> None:
    with pytest.raises(UnsafeTir, match=reason.replace(".", r"\.")):
        check_user_function(_func(COPY.format(value=value)))


def test_an_out_of_bounds_store_is_refused() -> None:
    body = """
for i in range(9):
    with T.sblock("b"):
        vi = T.axis.spatial(9, i)
        B[vi] = T.float32(1)
"""
    with pytest.raises(UnsafeTir, match="cannot prove B"):
        check_user_function(_func(body))


def test_a_binding_outside_its_domain_is_refused() -> None:
    body = """
for i in range(8):
    with T.sblock("b"):
        vi = T.axis.spatial(4, i)
        B[vi] = A[vi]
"""
    with pytest.raises(UnsafeTir, match="binding"):
        check_user_function(_func(body))


def test_a_declared_region_larger_than_the_access_is_refused() -> None:
    """Schedule rules size cache buffers from declared regions: an oversized one would make a
    cache stage read past the buffer although the body itself stays inside."""
    body = """
for i in range(4):
    with T.sblock("b"):
        vi = T.axis.spatial(4, i)
        T.reads(A[0:8])
        T.writes(B[vi])
        B[vi] = A[vi]
"""
    with pytest.raises(UnsafeTir, match="larger than what its body accesses"):
        check_user_function(_func(body))


def test_internal_allocations_are_capped() -> None:
    body = """
C = T.sblock_alloc_buffer((1 << 14, 1 << 14), "float32")
for i in range(8):
    with T.sblock("b"):
        vi = T.axis.spatial(8, i)
        C[vi, 0] = A[vi]
for i in range(8):
    with T.sblock("c"):
        vi = T.axis.spatial(8, i)
        B[vi] = C[vi, 0]
"""
    with pytest.raises(UnsafeTir, match="internal allocations exceed"):
        check_user_function(_func(body))


def test_while_loops_and_strided_parameters_are_refused() -> None:
    with pytest.raises(UnsafeTir, match="While"):
        check_user_function(_func("while True:\n    B[0] = A[0]"))
    strided = 'A: T.Buffer((8,), "float32", strides=(2,)), B: T.Buffer((8,), "float32")'
    with pytest.raises(UnsafeTir, match="compact"):
        check_user_function(_func(COPY.format(value="A[vi]"), params=strided))


@pytest.mark.parametrize("case", CASES, ids=[case_id(c) for c in CASES])
def test_every_catalog_operator_passes_as_user_tir(case: tuple[str, dict]) -> None:
    """The checks refuse nothing the catalog (fp32, fp16, int8) needs."""
    name, params = case
    op = get_operator(name)
    spec = catalog_workload(op.name, op.Params.model_validate(params))
    check_user_function(spec.mod["main"])


# What a security review got past the first version of these checks (each ran its payload:
# linked LLVM IR calling system() as root, or wrote out of bounds in the worker process).
REVIEW_FINDINGS = {
    "loop-pragma-links-llvm-ir": """
for i in T.serial(8, annotations={"pragma_import_llvm": "define void @f() { ret void }"}):
    with T.sblock("b"):
        vi = T.axis.spatial(8, i)
        B[vi] = A[vi]
""",
    "unrolled-loop": """
for i in T.unroll(8):
    with T.sblock("b"):
        vi = T.axis.spatial(8, i)
        B[vi] = A[vi]
""",
    "block-annotation": """
for i in range(8):
    with T.sblock("b"):
        vi = T.axis.spatial(8, i)
        T.sblock_attr({"pragma_import_c": "int x;"})
        B[vi] = A[vi]
""",
    "guard-on-data-then-store": """
for i in range(1):
    with T.sblock("b"):
        vi = T.axis.spatial(1, i)
        if T.Cast("int32", A[0]) >= 0 and T.Cast("int32", A[0]) < 8:
            A[0] = T.float32(100000000)
            B[T.Cast("int32", A[0])] = T.float32(1)
""",
    "int16-wraps-inline": """
for i in range(8):
    with T.sblock("b"):
        vi = T.axis.spatial(8, i)
        B[T.Cast("int32", T.Cast("int16", vi) * T.int16(10000)) // 10000] = A[vi]
""",
    "int16-wraps-through-bind": """
for i in range(8):
    with T.sblock("b"):
        vi = T.axis.spatial(8, i)
        x = T.bind(T.Cast("int16", vi) * T.int16(10000))
        B[T.Cast("int32", x) // 10000] = A[vi]
""",
}
STALE_BIND = """
for i in range(1):
    with T.sblock("b"):
        vi = T.axis.spatial(1, i)
        x = T.bind(I[0])
        I[0] = 3
        if I[0] >= 0 and I[0] < 8:
            B[x] = T.float32(1)
"""


FINDING_REASONS = {
    "loop-pragma-links-llvm-ir": "carries annotations",
    "unrolled-loop": "loops must be serial",
    "block-annotation": "annotation 'pragma_import_c' is not allowed",
    "guard-on-data-then-store": "cannot prove B",
    "int16-wraps-inline": "may overflow int16",
    "int16-wraps-through-bind": "may overflow int16",
}


@pytest.mark.parametrize("name", list(REVIEW_FINDINGS))
def test_what_the_security_review_found_is_refused(name: str) -> None:
    with pytest.raises(UnsafeTir, match=FINDING_REASONS[name]):
        check_user_function(_func(REVIEW_FINDINGS[name]))


def test_a_binding_of_loaded_data_is_no_fact() -> None:
    params = 'I: T.Buffer((1,), "int32"), B: T.Buffer((8,), "float32")'
    with pytest.raises(UnsafeTir, match="cannot prove"):
        check_user_function(_func(STALE_BIND, params=params))


def test_layout_free_buffers_must_name_parameters() -> None:
    func = _func(COPY.format(value="A[vi]")).with_attr("layout_free_buffers", [99])
    with pytest.raises(UnsafeTir, match="layout_free_buffers"):
        check_user_function(func)
