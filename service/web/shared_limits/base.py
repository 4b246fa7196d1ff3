"""The interfaces of the shared limits (`service.web.shared_limits`), and the answers they give."""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext

from service.web.quotas import too_many
from service.web.refusals import Refusal

RETRY_OWN_PARSE_S = 5  # what an identity already parsing is told to wait
LIMITS_RETRY_S = 5


class LimitsUnavailable(Refusal):
    """The shared limits could not be reached (Redis down): a 503, so nothing is done that a
    limit should have stopped."""

    def __init__(self, reason: str) -> None:
        super().__init__(
            503,
            f"the shared rate limits are unreachable ({reason}); retry",
            "limits_unavailable",
            {"Retry-After": str(LIMITS_RETRY_S)},
        )


class RateLimiter(ABC):
    """Token buckets by key: ``burst`` requests at once, then ``rate`` a second."""

    rate: float
    burst: int
    remote = False  # a call may wait on the network: async callers run it off the event loop

    @abstractmethod
    def take(self, key: str) -> float:
        """Spend one token of ``key``'s bucket: 0.0 when granted, else the seconds until one
        is available (nothing is spent then)."""

    def check(self, key: str) -> None:
        """`take`, raising the 429 (with ``Retry-After``) when the bucket is empty."""
        wait = self.take(key)
        if wait > 0:
            raise too_many(
                f"write rate limit: {self.rate:g} requests/s (bursts of {self.burst}) per "
                f"identity; retry in {wait:.1f} s",
                "rate_limited",
                wait,
            )


class ParseGate(ABC):
    """One code upload per identity parsed at a time, over every replica."""

    @abstractmethod
    def try_enter(self, who: str) -> str | None:
        """Mark ``who`` as parsing: a token to `leave` with, or None when it already is."""

    @abstractmethod
    def leave(self, who: str, token: str) -> None:
        """End the parse `try_enter` marked (nothing when another mark replaced it)."""

    def kept(self, who: str, token: str) -> AbstractContextManager[None]:
        """Keep the mark `try_enter` made alive for as long as the block runs, however long
        (a mark that expires renews itself here; one kept in this process needs nothing)."""
        return nullcontext()

    @contextmanager
    def parsing(self, who: str) -> Iterator[None]:
        """Hold ``who``'s one parse for the whole block; a 429 ``parse_in_progress`` when it
        is held already."""
        token = self.try_enter(who)
        if token is None:
            raise too_many(
                "this identity's previous code upload is still being parsed",
                "parse_in_progress",
                RETRY_OWN_PARSE_S,
            )
        try:
            with self.kept(who, token):
                yield
        finally:
            self.leave(who, token)


class ParseQuota(ABC):
    """Seconds of parsing per identity, as a balance: ``per_minute`` a minute come back, up to
    a minute's worth; a parse's seconds are taken off when it ends, and may take the balance
    below 0 (a debt, paid back at the same rate). ``per_minute`` 0: no quota."""

    per_minute: float

    @abstractmethod
    def debt_wait(self, who: str) -> float:
        """Seconds until ``who``'s balance is out of debt (0.0 when it is not in debt)."""

    @abstractmethod
    def spend(self, who: str, seconds: float) -> None:
        """Take ``seconds`` of parsing off ``who``'s balance."""

    def check(self, who: str) -> None:
        """A 429 ``parse_quota_exhausted`` (with ``Retry-After``) when ``who`` is in debt."""
        wait = self.debt_wait(who)
        if wait > 0:
            raise too_many(
                f"parse-time quota: {self.per_minute:g} s of parsing a minute per identity, "
                f"spent; retry in {math.ceil(wait)} s",
                "parse_quota_exhausted",
                wait,
            )


class AdmissionLocks(ABC):
    """A lock per identity held from its job-cap check to its jobs' creation, so two
    submissions of one identity (on any replicas) cannot both pass a cap with room for one."""

    @abstractmethod
    @contextmanager
    def admitting(self, who: str) -> Iterator[None]:
        """Hold ``who``'s admission lock (waiting for it while another submission holds it)."""
