"""User code (raw TIR, imported modules and traces) handed to the isolated parser, with its
failures as `service.app.refusals`: a refusal is an `InvalidInput` at the field (a 422), every
parser slot busy a `TooMany` (a 429 with ``Retry-After``; the same identity already parsing is
the gate's own 429), isolation unavailable on this host an `Unavailable` (a 503: the input is
never handled unisolated).

What one identity may take of the parsers: one parse at a time (a single token cannot hold
every slot of the process; a child may take its whole 30 s), and the seconds its parses hold a
slot are counted against its parse-time quota, which refuses it (a 429) while in debt. TIR too
big to be worth a parse (`check_tir_size`) is refused before any of that; a request that finds
every slot busy waits for one, first come first served (`tuning.jail.holding_slot`)."""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from service.app.ports import ParseLimits
from service.app.refusals import InvalidInput, TooMany, Unavailable
from service.shared.settings import Settings
from tuning.checks.tir_size import MAX_COUNTED, tir_blocks
from tuning.jail import SandboxBusy, SandboxUnavailable, holding_slot
from tuning.models.inputs import ModelInput
from tuning.untrusted.user_model import ModelRejected, ParsedModel, ParsedTask, parse_model
from tuning.untrusted.user_tasks import MAX_UPLOADED_TASKS, TaskSource, parse_tasks
from tuning.untrusted.user_tir import ParsedTir, TirRejected, parse_untrusted


def tir_too_large(settings: Settings, fmt: str, source: str) -> str | None:
    """Why TIR ``source`` (in ``fmt``) is past ``settings.max_tir_bytes`` (TVMScript text)
    or ``settings.max_tir_blocks``, or None. Counted on the text, nothing parsed."""
    if fmt == "tvmscript" and 0 < settings.max_tir_bytes < len(source.encode()):
        return f"TVMScript of more than {settings.max_tir_bytes} bytes is not parsed"
    if settings.max_tir_blocks <= 0:
        return None
    blocks = tir_blocks(fmt, source)
    if blocks is not None and blocks > settings.max_tir_blocks:
        counted = f"{blocks} blocks" if blocks < MAX_COUNTED else "blocks past counting (or a loop)"
        return f"{counted}; a function of more than {settings.max_tir_blocks} is not parsed"
    return None


def check_tir_size(
    settings: Settings, fmt: str, source: str, loc: Sequence[str | int], what: str = ""
) -> None:
    """A 422 ``tir_too_large`` at ``loc`` (its message starting with ``what``) when
    `tir_too_large` says so."""
    problem = tir_too_large(settings, fmt, source)
    if problem:
        raise InvalidInput(loc, what + problem, "tir_too_large")


@contextmanager
def parsing_turn(limits: ParseLimits, who: str) -> Iterator[None]:
    """``who``'s turn to parse: refused while its parse-time quota is in debt (429
    ``parse_quota_exhausted``) or while it parses already on any replica (429
    ``parse_in_progress``). Its children run in `parser_slot` inside it."""
    limits.parse_time.check(who)
    with limits.parses.parsing(who):
        yield


@contextmanager
def parser_slot(limits: ParseLimits, who: str) -> Iterator[None]:
    """One parser slot for every child of the block, waited for as `tuning.jail.holding_slot`
    does, and the seconds it was held counted against ``who``'s parse-time quota; the sandbox's
    busy and unavailable states as `TooMany` (429 ``parsers_busy``) and `Unavailable`."""
    try:
        with holding_slot():
            started = time.monotonic()
            try:
                yield
            finally:
                limits.parse_time.spend(who, time.monotonic() - started)
    except SandboxBusy as err:
        raise TooMany(str(err), "parsers_busy", err.retry_after) from None
    except SandboxUnavailable as err:
        raise Unavailable(str(err), "isolation_unavailable") from None


@contextmanager
def isolated_parser(limits: ParseLimits, who: str) -> Iterator[None]:
    """`parsing_turn` and one `parser_slot` for the whole block (``limits``:
    `service.web.shared_limits` implements them)."""
    with parsing_turn(limits, who), parser_slot(limits, who):
        yield


def parsed_tir(
    limits: ParseLimits,
    settings: Settings,
    fmt: str,
    source: str,
    loc: Sequence[str | int],
    who: str,
) -> ParsedTir:
    """The workload of TIR submitted by ``who``, parsed and re-derived in isolation; a 422 at
    ``loc`` when it is too large to parse (`check_tir_size`) or refused (the parser's reason)."""
    check_tir_size(settings, fmt, source, loc)
    with isolated_parser(limits, who):
        try:
            return parse_untrusted(fmt, source)
        except TirRejected as err:
            raise InvalidInput(loc, str(err), "invalid_tir") from None


def parsed_model(
    limits: ParseLimits,
    fmt: str,
    source: bytes,
    inputs: list[ModelInput],
    target: dict[str, Any],
    who: str,
    layout: str = "plain",
    precision: str = "float32",
) -> ParsedModel:
    """The tasks of a model submitted by ``who``, parsed, fused (in ``layout``) and extracted
    in isolation and re-derived in a second child; a 422 at ``source`` or ``inputs`` when it
    is refused."""
    with isolated_parser(limits, who):
        try:
            return parse_model(fmt, source, inputs, target, layout, precision)
        except ModelRejected as err:
            raise InvalidInput(("body", err.field), str(err), "invalid_model") from None


def parsed_tasks(
    limits: ParseLimits, settings: Settings, sources: Sequence[TaskSource], who: str
) -> list[ParsedTask]:
    """The workloads of the tasks a build sent (``who``), parsed and re-derived in isolation;
    a 422 at ``tasks`` (the reason names the task) when one is too large to parse
    (`check_tir_size`, each task on its own) or refused."""
    for index, source in enumerate(sources[:MAX_UPLOADED_TASKS]):  # parse_tasks counts them
        check_tir_size(settings, "json", source.module, ("body", "tasks"), f"task {index}: ")
    with isolated_parser(limits, who):
        try:
            return parse_tasks(sources)
        except ModelRejected as err:
            raise InvalidInput(("body", "tasks"), str(err), "invalid_task") from None
