"""User code (raw TIR, imported modules and traces) handed to the isolated parser, with its
failures turned into answers: a refusal is a 422 at the field, every parser slot busy a 429
with ``Retry-After``, isolation unavailable on this host a 503 (the input is never handled
unisolated)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from service.errors import invalid
from service.refusals import Refusal, refusal_schema
from tuning.sandbox import SandboxBusy, SandboxUnavailable
from tuning.tir_sandbox import ParsedTir, TirRejected, parse_untrusted

# What a route that parses user code may answer besides its own statuses (429 is auth's).
ISOLATION_RESPONSES: dict[int | str, dict] = {
    503: refusal_schema("User code cannot be isolated on this host: refused, never parsed")
}


@contextmanager
def isolated_parser() -> Iterator[None]:
    """Translate the sandbox's busy and unavailable states into 429 and 503 answers."""
    try:
        yield
    except SandboxBusy as err:
        raise Refusal(
            429, str(err), "parsers_busy", headers={"Retry-After": str(err.retry_after)},
            retry_after_s=err.retry_after,
        ) from None  # fmt: skip
    except SandboxUnavailable as err:
        raise Refusal(503, str(err), "isolation_unavailable") from None


def parsed_tir(fmt: str, source: str, loc: Sequence[str | int]) -> ParsedTir:
    """The workload of submitted TIR, parsed and re-derived in isolation; a 422 at ``loc``
    (with the parser's reason) when it is refused."""
    with isolated_parser():
        try:
            return parse_untrusted(fmt, source)
        except TirRejected as err:
            raise invalid(loc, str(err), "invalid_tir") from None
