"""What the use cases need of the limits the API's replicas share (`service.web.shared_limits`
implements them): the per-identity parse gate and admission lock."""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Protocol


class ParseGate(Protocol):
    """One parse of user code per identity at a time, on every replica."""

    def parsing(self, who: str) -> AbstractContextManager[None]: ...


class AdmissionLocks(Protocol):
    """One admission (count, then create) per identity at a time, on every replica."""

    def admitting(self, who: str) -> AbstractContextManager[None]: ...


class SubmissionLimits(Protocol):
    """What the shared limits offer a submission."""

    @property
    def parses(self) -> ParseGate: ...

    @property
    def admissions(self) -> AdmissionLocks: ...
