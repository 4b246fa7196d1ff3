"""Per-identity quotas' answer: the 429 with ``Retry-After`` (`too_many`). The write-rate buckets
are `service.web.shared_limits`'; the cap on an identity's queued + running jobs is
`service.app.admission.check_active_jobs` (a `service.app.refusals.TooMany`, answered by
`service.web.refused` with `too_many`)."""

from __future__ import annotations

import math

from service.web.refusals import Refusal


def too_many(msg: str, kind: str, retry_after_s: float) -> Refusal:
    """A 429 with ``Retry-After`` (whole seconds, at least 1), also in the body."""
    seconds = max(1, math.ceil(retry_after_s))
    return Refusal(429, msg, kind, {"Retry-After": str(seconds)}, retry_after_s=seconds)
