"""Issue 37, item 2: each identity's quota of parse seconds (`TUNEHUB_PARSE_SECONDS_PER_MINUTE`),
in this process or in Redis over every replica: a minute's worth may be spent at once, a parse
may take the balance into debt, and an identity in debt is refused (429
``parse_quota_exhausted`` with Retry-After) until the debt is paid back at the same rate."""

from __future__ import annotations

import uuid

import pytest

from service.shared.settings import Settings
from service.web.refusals import Refusal
from service.web.shared_limits import LimitsUnavailable, ParseQuota, shared_limits
from service.web.shared_limits.local import LocalParseQuota
from tests.conftest import free_port


def _refusal(quota: ParseQuota, who: str) -> Refusal:
    with pytest.raises(Refusal) as refused:
        quota.check(who)
    assert refused.value.status_code == 429 and refused.value.kind == "parse_quota_exhausted"
    return refused.value


def test_a_debt_is_refused_until_it_is_paid_back() -> None:
    now = [100.0]
    quota = LocalParseQuota(6.0, clock=lambda: now[0])  # 6 s a minute: 0.1 s back a second
    quota.check("a")  # a minute's worth to start with
    quota.spend("a", 5.0)
    quota.check("a")  # 1 s left
    quota.spend("a", 3.0)  # 2 s in debt: 20 s to pay back
    refused = _refusal(quota, "a")
    assert refused.headers == {"Retry-After": "20"} and refused.extra["retry_after_s"] == 20
    assert "6 s of parsing a minute" in refused.detail
    quota.check("b")  # another identity's balance is its own
    now[0] += 15.0
    assert _refusal(quota, "a").headers == {"Retry-After": "5"}
    now[0] += 5.0
    quota.check("a")  # paid back
    now[0] += 3600.0
    quota.spend("a", 1.0)
    assert quota.debt_wait("a") == 0.0  # refilled to a minute's worth, never beyond


def test_a_quota_of_0_counts_nothing() -> None:
    quota = LocalParseQuota(0.0)
    quota.spend("a", 1e6)
    quota.check("a")


def test_parse_time_is_counted_over_every_replica(redis_url: str) -> None:
    one, two = (
        shared_limits(Settings(redis_url=redis_url, parse_seconds_per_minute=6.0)) for _ in range(2)
    )
    who = f"parse-time-{uuid.uuid4().hex[:8]}"
    try:
        two.parse_time.check(who)
        one.parse_time.spend(who, 5.0)
        two.parse_time.check(who)  # 1 s left
        two.parse_time.spend(who, 3.0)  # 2 s in debt, spent on the other replica
        refused = _refusal(one.parse_time, who)
        assert refused.headers is not None and 19 <= int(refused.headers["Retry-After"]) <= 20
        one.parse_time.check(f"{who}-other")
    finally:
        one.close()
        two.close()


def test_with_redis_down_a_parse_is_refused_and_a_debit_is_not_an_error() -> None:
    dead = f"redis://127.0.0.1:{free_port()}/0"
    limits = shared_limits(Settings(redis_url=dead))
    try:
        with pytest.raises(LimitsUnavailable):
            limits.parse_time.check("a")  # nothing is parsed that the quota might refuse
        limits.parse_time.spend("a", 1.0)  # the parse is done by then: only logged
    finally:
        limits.close()
