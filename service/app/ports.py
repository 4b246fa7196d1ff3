"""What the use cases need of the limits the API's replicas share (`service.web.shared_limits`
implements them): the per-identity parse gate, parse-time quota and admission lock."""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Protocol


class ParseGate(Protocol):
    """One parse of user code per identity at a time, on every replica."""

    def parsing(self, who: str) -> AbstractContextManager[None]: ...


class ParseQuota(Protocol):
    """Seconds of parsing per identity, on every replica: `check` refuses (a 429) an identity
    in debt; `spend` counts a parse's seconds once it ended."""

    def check(self, who: str) -> None: ...

    def spend(self, who: str, seconds: float) -> None: ...


class AdmissionLocks(Protocol):
    """One admission (count, then create) per identity at a time, on every replica."""

    def admitting(self, who: str) -> AbstractContextManager[None]: ...


class ParseLimits(Protocol):
    """What the shared limits offer a parse of user code."""

    @property
    def parses(self) -> ParseGate: ...

    @property
    def parse_time(self) -> ParseQuota: ...


class SubmissionLimits(ParseLimits, Protocol):
    """What the shared limits offer a submission."""

    @property
    def admissions(self) -> AdmissionLocks: ...
