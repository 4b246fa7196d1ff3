"""User code (raw TIR, imported modules and traces) handed to the isolated parser, with its
failures as `service.app.refusals`: a refusal is an `InvalidInput` at the field (a 422), every
parser slot busy a `TooMany` (a 429 with ``Retry-After``; the same identity already parsing is
the gate's own 429), isolation unavailable on this host an `Unavailable` (a 503: the input is
never handled unisolated). One identity parses one request at a time, so a single token cannot
hold every slot of the process (a child may take its whole 30 s)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from service.app.ports import ParseGate
from service.app.refusals import InvalidInput, TooMany, Unavailable
from tuning.jail import SandboxBusy, SandboxUnavailable, holding_slot
from tuning.models.inputs import ModelInput
from tuning.untrusted.user_model import ModelRejected, ParsedModel, ParsedTask, parse_model
from tuning.untrusted.user_tasks import TaskSource, parse_tasks
from tuning.untrusted.user_tir import ParsedTir, TirRejected, parse_untrusted


@contextmanager
def isolated_parser(gate: ParseGate, who: str) -> Iterator[None]:
    """Translate the sandbox's busy and unavailable states into `TooMany` and `Unavailable`,
    and refuse (the gate's 429) a second parse of the identity ``who`` while its first one runs
    on any replica (``gate``: `service.web.shared_limits` implements it)."""
    with gate.parsing(who):
        try:
            with holding_slot():  # one slot for every child of this request
                yield
        except SandboxBusy as err:
            raise TooMany(str(err), "parsers_busy", err.retry_after) from None
        except SandboxUnavailable as err:
            raise Unavailable(str(err), "isolation_unavailable") from None


def parsed_tir(
    gate: ParseGate, fmt: str, source: str, loc: Sequence[str | int], who: str
) -> ParsedTir:
    """The workload of TIR submitted by ``who``, parsed and re-derived in isolation; a 422 at
    ``loc`` (with the parser's reason) when it is refused."""
    with isolated_parser(gate, who):
        try:
            return parse_untrusted(fmt, source)
        except TirRejected as err:
            raise InvalidInput(loc, str(err), "invalid_tir") from None


def parsed_model(
    gate: ParseGate,
    fmt: str,
    source: bytes,
    inputs: list[ModelInput],
    target: dict[str, Any],
    who: str,
) -> ParsedModel:
    """The tasks of a model submitted by ``who``, parsed, fused and extracted in isolation and
    re-derived in a second child; a 422 at ``source`` or ``inputs`` when it is refused."""
    with isolated_parser(gate, who):
        try:
            return parse_model(fmt, source, inputs, target)
        except ModelRejected as err:
            raise InvalidInput(("body", err.field), str(err), "invalid_model") from None


def parsed_tasks(gate: ParseGate, sources: Sequence[TaskSource], who: str) -> list[ParsedTask]:
    """The workloads of the tasks a build sent (``who``), parsed and re-derived in isolation;
    a 422 at ``tasks`` (the reason names the task) when one is refused."""
    with isolated_parser(gate, who):
        try:
            return parse_tasks(sources)
        except ModelRejected as err:
            raise InvalidInput(("body", "tasks"), str(err), "invalid_task") from None
