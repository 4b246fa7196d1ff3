"""The shared limits in Redis (``TUNEHUB_REDIS_URL``), for several API replicas.

* Write-rate buckets: one hash per key (``tunehub:rate:<key>``: tokens, time) updated by one
  Lua script, atomic on the Redis server and timed by its clock (``TIME``), so replicas with
  skewed clocks agree; a bucket expires once it would be full again.
* One parse per identity: ``SET tunehub:parse:<key> <token> NX PX`` expiring after
  `PARSE_LEASE_MS`, so that a replica that died mid-parse frees it, and renewed by its holder
  every third of that while its parse runs (an import parses up to 64 workloads in turn, each
  after a wait for a parser: far longer than any lease); deleted by its own token only. A
  renewal Redis misses is logged and tried again; one that finds the key gone or another's
  stops.
* Admission: ``SET tunehub:admit:<name> <token> NX PX`` taken in a short retry loop, held from
  the job-cap check to the jobs' creation, deleted by its own token.
* Parse time: one hash per identity (``tunehub:parsetime:<key>``: seconds, time), read and
  debited by one Lua script timed by the Redis clock, expiring once the balance is full again.
  A debit lost to an unreachable Redis is logged, not answered: the parse is done by then.

Redis unreachable, or silent past ``Settings.redis_timeout_s`` (one try, no retries): a
`LimitsUnavailable` 503, never a write that a limit should have stopped. One failure opens a
circuit breaker shared by the four limits (`service.web.shared_limits.breaker`): for
`BREAKER_OPEN_S` every call is that 503 at once, without touching Redis, then one call probes
it. A partitioned or overloaded Redis so costs one write a timeout, not every write.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import redis as redis_client
from redis.backoff import NoBackoff
from redis.retry import Retry

from service.web.shared_limits.base import (
    AdmissionLocks,
    LimitsUnavailable,
    ParseGate,
    ParseQuota,
    RateLimiter,
)
from service.web.shared_limits.breaker import Breaker, CircuitOpen

log = logging.getLogger("tunehub.limits")

PREFIX = "tunehub:"
PARSE_LEASE_MS = 120_000  # renewed every 40 s while the parse runs
ADMIT_LEASE_MS = 30_000  # the longest a check-then-create may hold an identity's lock
ADMIT_WAIT_S = 10.0  # how long a submission waits for its identity's lock
BREAKER_OPEN_S = 5.0  # after a failure, how long every call is refused before one probes

# KEYS[1]: the bucket; ARGV: rate, burst. Returns the wait in seconds as a string (0: granted).
TAKE_TOKEN = """
local rate = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local clock = redis.call('TIME')
local now = tonumber(clock[1]) + tonumber(clock[2]) / 1000000
local held = redis.call('HMGET', KEYS[1], 'tokens', 'at')
local tokens = tonumber(held[1]) or burst
local at = tonumber(held[2]) or now
tokens = math.min(burst, tokens + math.max(0, now - at) * rate)
local wait = 0
if tokens < 1 then
  wait = (1 - tokens) / rate
else
  tokens = tokens - 1
end
redis.call('HSET', KEYS[1], 'tokens', string.format('%.6f', tokens),
           'at', string.format('%.6f', now))
redis.call('PEXPIRE', KEYS[1], math.ceil(burst / rate * 1000) + 1000)
return string.format('%.6f', wait)
"""

# KEYS[1]: an identity's parse time; ARGV: seconds a minute, seconds to take off (0: only read).
# Returns the seconds until the balance is out of debt, as a string (0: not in debt).
PARSE_TIME = """
local per_minute = tonumber(ARGV[1])
local spent = tonumber(ARGV[2])
local clock = redis.call('TIME')
local now = tonumber(clock[1]) + tonumber(clock[2]) / 1000000
local held = redis.call('HMGET', KEYS[1], 'seconds', 'at')
local seconds = tonumber(held[1]) or per_minute
local at = tonumber(held[2]) or now
seconds = math.min(per_minute, seconds + math.max(0, now - at) * per_minute / 60) - spent
if spent > 0 then
  redis.call('HSET', KEYS[1], 'seconds', string.format('%.6f', seconds),
             'at', string.format('%.6f', now))
  redis.call('PEXPIRE', KEYS[1], math.ceil((per_minute - seconds) * 60000 / per_minute) + 1000)
end
return string.format('%.6f', math.max(0, -seconds) * 60 / per_minute)
"""

# KEYS[1]: a lock; ARGV: the holder's token, a lease in ms. Extends the key's lease only if the
# token matches; 1 if it did.
RENEW = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
"""

# KEYS[1]: a lock; ARGV[1]: the holder's token. Deletes the key only if the token matches.
RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"""


def redis_limits(
    url: str, rate_per_s: float, burst: int, parse_per_minute: float, timeout_s: float
) -> tuple[RateLimiter, ParseGate, ParseQuota, AdmissionLocks, Any]:
    """The four limits over one Redis connection pool at ``url``, each call given
    ``timeout_s`` and one try, behind one breaker; and the client."""
    client = redis_client.Redis.from_url(
        url,
        socket_timeout=timeout_s,
        socket_connect_timeout=timeout_s,
        retry=Retry(NoBackoff(), 0),  # redis-py retries 3 times by default: 4x the deadline
    )
    reachable = _Reachable(Breaker(BREAKER_OPEN_S))
    return (
        RedisWriteLimiter(client, rate_per_s, burst, reachable),
        RedisParseGate(client, reachable),
        RedisParseQuota(client, parse_per_minute, reachable),
        RedisAdmissionLocks(client, reachable),
        client,
    )


class _Reachable:
    """Calls to Redis behind the breaker; a failure, or the open breaker, as the
    `LimitsUnavailable` 503."""

    def __init__(self, breaker: Breaker) -> None:
        self.breaker = breaker

    @contextmanager
    def __call__(self) -> Iterator[None]:
        try:
            with self.breaker.guard(redis_client.RedisError):
                yield
        except redis_client.RedisError as err:
            raise LimitsUnavailable(type(err).__name__) from None
        except CircuitOpen as err:
            raise LimitsUnavailable(f"circuit open: Redis failed ({err})") from None


class RedisWriteLimiter(RateLimiter):
    """Token buckets in Redis (see the module docstring). A rate of 0 lets everything through."""

    remote = True

    def __init__(self, client: Any, rate_per_s: float, burst: int, reachable: _Reachable) -> None:
        self.client = client
        self._reachable = reachable
        self.rate = rate_per_s
        self.burst = max(1, burst)
        self._take = client.register_script(TAKE_TOKEN)

    def take(self, key: str) -> float:
        if self.rate <= 0:
            return 0.0
        with self._reachable():
            wait = self._take(keys=[PREFIX + "rate:" + key], args=[self.rate, self.burst])
        return float(wait)


class RedisParseGate(ParseGate):
    """One parse per identity, as an expiring Redis key renewed while the parse runs (see the
    module docstring); ``lease_ms`` is `PARSE_LEASE_MS` but in tests."""

    def __init__(self, client: Any, reachable: _Reachable, lease_ms: int = PARSE_LEASE_MS) -> None:
        self.client = client
        self._reachable = reachable
        self.lease_ms = lease_ms
        self._release = client.register_script(RELEASE)
        self._renew = client.register_script(RENEW)

    def try_enter(self, who: str) -> str | None:
        token = uuid.uuid4().hex
        with self._reachable():
            taken = self.client.set(PREFIX + "parse:" + who, token, nx=True, px=self.lease_ms)
        return token if taken else None

    @contextmanager
    def kept(self, who: str, token: str) -> Iterator[None]:
        """Renew ``who``'s mark every third of its lease, from a thread, until the block
        ends."""
        done = threading.Event()
        renewer = threading.Thread(
            target=self._keep, args=(who, token, done), name=f"parse-lease-{who}", daemon=True
        )
        renewer.start()
        try:
            yield
        finally:
            done.set()
            renewer.join()

    def _keep(self, who: str, token: str, done: threading.Event) -> None:
        while not done.wait(self.lease_ms / 3000):
            try:
                with self._reachable():
                    held = self._renew(keys=[PREFIX + "parse:" + who], args=[token, self.lease_ms])
            except LimitsUnavailable as err:
                log.warning("the parse lease of %r was not renewed: %s", who, err.detail)
                continue
            if not held:
                log.warning("the parse lease of %r expired before its parse ended", who)
                return

    def leave(self, who: str, token: str) -> None:
        with self._reachable():
            self._release(keys=[PREFIX + "parse:" + who], args=[token])


class RedisParseQuota(ParseQuota):
    """Each identity's parse seconds in Redis (see the module docstring and `ParseQuota`)."""

    def __init__(self, client: Any, per_minute: float, reachable: _Reachable) -> None:
        self.client = client
        self._reachable = reachable
        self.per_minute = per_minute
        self._script = client.register_script(PARSE_TIME)

    def _run(self, who: str, seconds: float) -> float:
        with self._reachable():
            wait = self._script(keys=[PREFIX + "parsetime:" + who], args=[self.per_minute, seconds])
        return float(wait)

    def debt_wait(self, who: str) -> float:
        return self._run(who, 0.0) if self.per_minute > 0 else 0.0

    def spend(self, who: str, seconds: float) -> None:
        if self.per_minute <= 0 or seconds <= 0:
            return
        try:
            self._run(who, seconds)
        except LimitsUnavailable as err:
            log.warning("%.1f s of parsing by %r went uncounted: %s", seconds, who, err.detail)


class RedisAdmissionLocks(AdmissionLocks):
    """Per-identity locks as expiring Redis keys (see the module docstring)."""

    def __init__(self, client: Any, reachable: _Reachable) -> None:
        self.client = client
        self._reachable = reachable
        self._release = client.register_script(RELEASE)

    @contextmanager
    def admitting(self, who: str) -> Iterator[None]:
        key, token = PREFIX + "admit:" + who, uuid.uuid4().hex
        deadline = time.monotonic() + ADMIT_WAIT_S
        with self._reachable():
            while not self.client.set(key, token, nx=True, px=ADMIT_LEASE_MS):
                if time.monotonic() > deadline:
                    raise LimitsUnavailable(f"the admission lock of {who!r} stayed held")
                time.sleep(0.01)
        try:
            yield
        finally:
            with self._reachable():
                self._release(keys=[key], args=[token])
