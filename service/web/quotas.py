"""Per-identity quotas' answers: the 429 with ``Retry-After`` (`too_many`) and the cap on an
identity's queued + running jobs (`check_active_jobs`, counted in the store). The write-rate
buckets are `service.web.shared_limits`'."""

from __future__ import annotations

import math

from service.web.refusals import Refusal

ACTIVE_JOBS_RETRY_S = 30  # what a client at its job cap is told to wait


def too_many(msg: str, kind: str, retry_after_s: float) -> Refusal:
    """A 429 with ``Retry-After`` (whole seconds, at least 1), also in the body."""
    seconds = max(1, math.ceil(retry_after_s))
    return Refusal(429, msg, kind, {"Retry-After": str(seconds)}, retry_after_s=seconds)


def check_active_jobs(active: int, limit: int) -> None:
    """The 429 of an identity that already has ``active`` queued or running jobs, when that
    reaches ``limit`` (0: no cap)."""
    if limit > 0 and active >= limit:
        raise too_many(
            f"{active} of your jobs are queued or running; at most {limit} may be "
            f"(wait for some to finish or cancel some)",
            "too_many_jobs",
            ACTIVE_JOBS_RETRY_S,
        )
