"""Untrusted TIR — TVMScript text or TVM JSON — turned into a workload without trusting it.

TVMScript parsing evaluates Python and TVM's JSON loader crashes on crafted documents, so the
service never does either in its own process. `parse_untrusted` checks the text's Python
syntax tree first (a cheap filter, not the defence: no imports but TVMScript's own, no dunder
names, one definition), then parses in an isolated child (`tuning.untrusted.ask`), which also
runs the allowlist and bounds proofs of `tuning.checks.tir_checks`. What the service keys on
(module JSON, structural hash, FLOP count) is then derived again by a second, fresh child from
the first child's output, and the two must agree: a child that user code took over can lie only
about a function that a clean child then checks and describes. `check_stored` is the worker's
and the importer's way to re-check a stored module and replay traces on it, in a child as well.
"""

from __future__ import annotations

import ast
import math
from dataclasses import dataclass
from typing import Any

from tuning.checks.script_filter import check_script_names
from tuning.jail import Limits, SandboxFailed, holding_slot
from tuning.untrusted.ask import ask

MAX_SOURCE_BYTES = 256 * 1024
# The parse and the re-derivation of one function, each: any catalog operator takes ~1.3 s
# (most of it TVM's import), 64 blocks of 7-term sums (30 KB of TVMScript) ~3 s. A function
# that costs more is refused (its CPU-time limit) rather than hold a parser for 10 s a child.
PARSE_LIMITS = Limits(cpu_seconds=5)
# Names TVMScript text may read without binding them itself.
FREE_NAMES = frozenset({"T", "I", "range", "len", "min", "max", "int", "float", "bool", "tuple"})
MAX_SHASH_DIGITS = 20  # a 64-bit hash in decimal
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
    except (RecursionError, MemoryError):  # CPython's parser gives up on deep nesting
        raise TirRejected("the source nests too deeply to parse") from None
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
    for found in ast.walk(tree):
        line = getattr(found, "lineno", "?")
        if isinstance(found, (ast.Import, ast.ImportFrom)) and found not in tree.body:
            raise TirRejected(f"import inside the function (line {line})")
        if isinstance(found, (ast.Lambda, ast.Global, ast.Nonlocal, ast.AsyncFunctionDef)):
            raise TirRejected(f"{type(found).__name__} is not allowed (line {line})")
    # Names and attribute chains: TVMScript's own, or bound by the source (no `eval`, `open`,
    # `getattr`, no `I.entry.inspect...`): tuning.checks.script_filter.
    check_script_names(tree, FREE_NAMES, TirRejected)
    return "\n".join(lines) + "\n"


def _ask(request: str, limits: Limits | None = None, **payload: Any) -> dict[str, Any]:
    """One isolated child's answer; its failures and refusals as `TirRejected`."""
    try:
        answer = ask(request, payload, limits)
    except SandboxFailed as err:
        raise TirRejected(str(err)) from None
    if answer.get("ok") is not True:
        error = answer.get("error")
        raise TirRejected(error[:1000] if isinstance(error, str) else "the input was refused")
    return answer


def _workload(answer: dict[str, Any]) -> ParsedTir:
    mod_json, shash, flop = answer.get("mod_json"), answer.get("shash"), answer.get("flop")
    if not (isinstance(mod_json, str) and isinstance(shash, str) and shash.isdigit()):
        raise TirRejected("the isolated parser answered out of protocol")
    if len(shash) > MAX_SHASH_DIGITS or type(flop) is not float:
        raise TirRejected("the isolated parser answered out of protocol")
    if not (math.isfinite(flop) and flop >= 0):
        raise TirRejected("the isolated parser answered out of protocol")
    return ParsedTir(mod_json=mod_json, shash=shash, flop=float(flop))


def parse_untrusted(fmt: str, source: str) -> ParsedTir:
    """Parse submitted TIR in one isolated child and re-derive it in a second; raise
    `TirRejected` with the reason (and let `SandboxBusy` / `SandboxUnavailable` through)."""
    if fmt == "tvmscript":
        source = check_syntax(source)
    elif fmt != "json":
        raise TirRejected(f"unknown format {fmt!r}: use 'tvmscript' or 'json'")
    elif len(source.encode()) > MAX_SOURCE_BYTES:
        raise TirRejected(f"source is larger than {MAX_SOURCE_BYTES} bytes")
    with holding_slot():  # one slot for both children
        first = _workload(_ask("parse", PARSE_LIMITS, format=fmt, source=source))
        second = _workload(_ask("derive", PARSE_LIMITS, mod_json=first.mod_json))
    if second != first:
        raise TirRejected("the parser's answer does not re-derive to the same function")
    return second


def check_stored(mod_json: str, shash: str, traces: list[Any] | None = None) -> list[int]:
    """Re-check a user workload in an isolated child: it passes every check and hashes to
    ``shash``; returns the indices of ``traces`` that do not replay on it. `TirRejected`
    when the module fails (or the child dies, e.g. on a trace that crashes TVM)."""
    answer = _ask("check", mod_json=mod_json, shash=shash, traces=list(traces or []))
    bad = answer.get("bad_traces")
    if not (isinstance(bad, list) and all(isinstance(i, int) for i in bad)):
        raise TirRejected("the isolated checker answered out of protocol")
    return bad
