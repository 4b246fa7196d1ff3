"""TVMScript that runs arbitrary Python when parsed, the way an attacker writes it: the AST
filter sees no import and no dunder name, TVMScript's evaluator still reaches builtins."""

from __future__ import annotations

import json
import re
from typing import Any

PROBE_MARK = "PROBE"


def running(code: str) -> str:
    """A prim_func whose loop extent executes ``code`` (Python statements) while parsing."""
    hexed = code.encode().hex()
    run = f"('builtins').exec(bytes.fromhex('{hexed}').decode()) or 0"
    escape = f'"_" + "_import_" + "_{run}"'
    return f"""
@T.prim_func(s_tir=True)
def main(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32")):
    for i in range(4 + eval({escape})):
        with T.sblock("b"):
            vi = T.axis.spatial(4, i)
            B[vi] = A[vi]
"""


def reporting(code: str) -> str:
    """Like `running`, then raises with the dict ``results`` as JSON, so that the parser's
    error message carries what ``code`` found out."""
    tail = f"raise RuntimeError({PROBE_MARK!r} + __import__('json').dumps(results))"
    return running(f"results = {{}}\n{code}\n{tail}")


def report_of(message: str) -> dict[str, Any]:
    """The ``results`` a `reporting` script raised, read back from a refusal message."""
    found = re.search(PROBE_MARK + r"(\{.*\})", message)
    assert found, message
    return json.loads(found.group(1))
