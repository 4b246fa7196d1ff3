"""The limits every API replica of a deployment shares: the write-rate buckets, the rule that
one identity parses one code upload at a time, each identity's quota of parse seconds, and the
lock that makes an identity's job-cap check and its job creation one step.

Where they live: in Redis when ``TUNEHUB_REDIS_URL`` is set (`service.web.shared_limits.redis`),
else in this process (`service.web.shared_limits.local`, the embedded default: one API process).
Redis rather than the database because a token bucket is updated on every write request of
every replica: an atomic Lua script in Redis costs ~0.1 ms and no database transaction or row
lock; the job cap itself is still counted in the database (the jobs table is the truth), only
the check-then-create step is serialised per identity.

What stays per process, on purpose: the isolated parsers' slots (``max_parses``). They guard
the cores and memory of the host a replica runs on (each parse takes ~1.5 s of a core and up
to 4 GiB there), so a fleet's parse capacity grows with its replicas; what must not grow with
them, one identity holding a parse on every replica, is the shared rule above; nor what one
identity's parses cost, which the shared quota of parse seconds counts over every replica.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from service.shared.settings import Settings
from service.web.shared_limits.base import (
    AdmissionLocks,
    LimitsUnavailable,
    ParseGate,
    ParseQuota,
    RateLimiter,
)
from service.web.shared_limits.local import (
    LocalAdmissionLocks,
    LocalParseGate,
    LocalParseQuota,
    WriteLimiter,
)


@dataclass(frozen=True)
class SharedLimits:
    """The four shared limits of one API process."""

    writes: RateLimiter
    parses: ParseGate
    parse_time: ParseQuota
    admissions: AdmissionLocks
    where: str  # "process" or "redis", for logs
    client: Any = None  # the Redis client, closed by `close`

    def close(self) -> None:
        """Release the Redis connections (nothing for local limits)."""
        if self.client is not None:
            self.client.close()


def shared_limits(settings: Settings) -> SharedLimits:
    """The limits ``settings`` configure: in Redis at ``settings.redis_url``, else local."""
    if settings.redis_url:
        from service.web.shared_limits.redis import redis_limits

        writes, parses, parse_time, admissions, client = redis_limits(
            settings.redis_url,
            settings.write_rate_per_s,
            settings.write_burst,
            settings.parse_seconds_per_minute,
            settings.redis_timeout_s,
        )
        return SharedLimits(writes, parses, parse_time, admissions, "redis", client)
    return SharedLimits(
        WriteLimiter(settings.write_rate_per_s, settings.write_burst),
        LocalParseGate(),
        LocalParseQuota(settings.parse_seconds_per_minute),
        LocalAdmissionLocks(),
        "process",
    )


__all__ = [
    "AdmissionLocks",
    "LimitsUnavailable",
    "ParseGate",
    "ParseQuota",
    "RateLimiter",
    "SharedLimits",
    "shared_limits",
]
