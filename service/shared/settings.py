"""Service configuration: one dataclass read from flags and ``TUNEHUB_*`` environment variables."""

from __future__ import annotations

import ipaddress
import os
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

ENV_PREFIX = "TUNEHUB_"


def default_timing_ms() -> int:
    """How long each timed kernel run lasts at least, unless set: ``$TUNEHUB_TIMING_MS`` (the
    test suite sets 10: it checks behaviour, not speed), else 100 ms."""
    return int(os.environ.get(ENV_PREFIX + "TIMING_MS") or 100)


TRUE_WORDS, FALSE_WORDS = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


def _names(text: str) -> tuple[str, ...]:
    """A comma-separated list of names."""
    return tuple(name.strip() for name in text.split(",") if name.strip())


def _networks(text: str) -> tuple[str, ...]:
    """A comma-separated list of IP addresses or CIDR networks, each checked."""
    items = _names(text)
    for item in items:
        ipaddress.ip_network(item, strict=False)  # a ValueError names a bad one
    return items


def _flag(text: str) -> bool:
    """A boolean environment variable: 1/true/yes/on or 0/false/no/off."""
    word = text.strip().lower()
    if word not in TRUE_WORDS + FALSE_WORDS:
        raise ValueError(f"expected one of {TRUE_WORDS + FALSE_WORDS}, got {text!r}")
    return word in TRUE_WORDS


ARTIFACT_STORES = ("auto", "directory", "database")


def _store_kind(text: str) -> str:
    """An artifact store's kind, one of `ARTIFACT_STORES`."""
    if text not in ARTIFACT_STORES:
        raise ValueError(f"expected one of {ARTIFACT_STORES}, got {text!r}")
    return text


@dataclass(frozen=True)
class Settings:
    """Where tunehub keeps its data and how it talks to the broker.

    Defaults are the embedded setup: everything under ``data_dir`` (SQLite store, SQLite broker,
    artifacts), so `tunehub serve` needs no other server.
    """

    data_dir: Path = Path("./tunehub-data")
    database_url: str | None = None  # default: sqlite:///<data_dir>/tunehub.db
    broker_url: str | None = None  # default: sqla+sqlite:///<data_dir>/broker.db
    artifact_dir: Path | None = None  # default: <data_dir>/artifacts
    # Where artifact bytes live (schedules_db.blobs): "directory" (artifact_dir) or "database"
    # (the store's database: a fleet then shares no disk). "auto" (the default) is the database
    # when the store is a network database (PostgreSQL) and the directory on SQLite, so a fleet
    # set up with only the database and broker URLs works (`blob_store`).
    artifact_store: str = "auto"
    # The API's local copies of database blobs (<data_dir>/artifact-cache), oldest dropped past
    # this many bytes.
    artifact_cache_bytes: int = 2 * 2**30
    # Garbage collection of unreferenced artifacts (schedules_db.blobs.collect), run by the
    # reaper's replica: how often, and how old an unreferenced blob must be to go.
    gc_every_s: float = 3600.0  # how often the reaper's replica collects unreferenced artifacts
    gc_grace_s: float = 3600.0  # how old an unreferenced artifact must be before it goes
    # Redis shared by every API replica for write-rate buckets, the one-parse-per-identity rule
    # and job-cap admission (service.web.shared_limits); unset: all three live in this process.
    redis_url: str | None = None
    # How long one call to Redis may take before it counts as failed (a 503): a Redis that
    # accepts and never answers then costs a write this long once, and nothing while the
    # breaker stays open (service.web.shared_limits.breaker).
    redis_timeout_s: float = 1.0
    max_trials: int = 20000  # the largest trial budget a job may ask for
    # A running job (or compiling model) whose heartbeat is this old has lost its worker: the
    # reaper requeues it. Workers and their running jobs beat every heartbeat_every_s.
    stale_after_s: float = 90.0
    heartbeat_every_s: float = 10.0
    reaper_every_s: float = 15.0  # how often the reaper sweeps
    # A queued job the broker never took (it was down when the job was made) is sent again
    # after this long.
    requeue_after_s: float = 300.0
    num_trials_per_iter: int = 64  # candidates measured per search round (MetaSchedule's batch)
    # Each timed run of a kernel lasts at least this long (ms), in the search and in verification.
    timing_ms: int = field(default_factory=default_timing_ms)
    seed: int | None = None  # the search's random seed (None: a fresh one per job)
    # Auth (service.web.auth): off = every client is the identity "local" with every scope.
    auth: bool = False
    anonymous_reads: bool = False  # with auth: GET routes and POST /lookup answer without a token
    # How long an API process trusts a token's row once read (service.web.token_cache): a
    # revoked token stops working on every replica at most this long after the revocation.
    # 0: one SELECT per authenticated request.
    token_cache_s: float = 0.5
    # Per identity (per client address with auth off); 0 switches a limit off.
    write_rate_per_s: float = 5.0  # token bucket refill for POST routes
    write_burst: int = 30  # the bucket's size
    max_active_jobs: int = 100  # queued + running jobs one identity may have
    # Request body caps in bytes (service.web.limits): a 413 beyond them, the rest never read.
    max_body_bytes: int = 64 * 1024  # every route not named below
    max_job_body_bytes: int = 2**20  # POST /jobs (raw TIR source is at most 256 KiB)
    max_import_body_bytes: int = 64 * 2**20  # POST /import (a MetaSchedule JSON database)
    max_model_body_bytes: int = 256 * 2**20  # POST /models (model uploads)
    # Isolated parsers of user code (tuning.jail) one API process runs at once; a request
    # past that waits (parse_wait_s), then gets a 429 with Retry-After. Each takes ~1.8 s of a
    # core and up to 4 GiB.
    max_parses: int = 2
    # A request past max_parses waits this long for a parser, first come first served (at most
    # 8 wait), before its 429; 0: the 429 at once.
    parse_wait_s: float = 10.0
    # Seconds of parsing (a parser held, wall clock) one identity may spend a minute, over every
    # replica: each parse is counted when it ends, and an identity in debt gets a 429
    # parse_quota_exhausted with Retry-After before its next upload is parsed. A minute's worth
    # may be spent at once; 0: no quota.
    parse_seconds_per_minute: float = 30.0
    # User TIR (raw TIR, each task of POST /tasks, each workload of POST /import) is refused
    # before it is parsed (a 422 tir_too_large at the field) with more blocks than this, or as
    # TVMScript text of more bytes than max_tir_bytes (JSON keeps its own caps: 256 KiB raw,
    # 1 MiB a task). 0: no cap.
    max_tir_blocks: int = 64
    max_tir_bytes: int = 64 * 1024
    # Job event streams one API process holds open (service.web.streams): per identity, and in
    # all; a stream past either is a 429 (0: no cap). Each polls the store twice a second.
    max_streams_per_identity: int = 16
    max_streams: int = 256
    # Host names the API answers to besides the loopback ones (service.web.allowed_hosts): a
    # request addressed to any other name is a 400 (DNS rebinding).
    allowed_hosts: tuple[str, ...] = ()
    # Reverse proxies (IPs or CIDR networks) whose X-Forwarded-For and X-Forwarded-Proto the API
    # believes (service.web.forwarded): a request from one of them counts as the client it names.
    # Default none: every client is its TCP peer, whatever headers it sends.
    trusted_proxies: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        _store_kind(self.artifact_store)

    @classmethod
    def from_env(cls, **overrides: object) -> Settings:
        """Settings from ``TUNEHUB_*`` variables, then explicit ``overrides`` (flags) on top."""
        env = os.environ
        values: dict[str, Any] = {}  # each field's own type
        for name, kind in (
            ("data_dir", Path),
            ("database_url", str),
            ("broker_url", str),
            ("artifact_dir", Path),
            ("artifact_store", _store_kind),
            ("artifact_cache_bytes", int),
            ("gc_every_s", float),
            ("gc_grace_s", float),
            ("redis_url", str),
            ("redis_timeout_s", float),
            ("max_trials", int),
            ("stale_after_s", float),
            ("heartbeat_every_s", float),
            ("reaper_every_s", float),
            ("requeue_after_s", float),
            ("num_trials_per_iter", int),
            ("timing_ms", int),
            ("seed", int),
            ("auth", _flag),
            ("anonymous_reads", _flag),
            ("token_cache_s", float),
            ("write_rate_per_s", float),
            ("write_burst", int),
            ("max_active_jobs", int),
            ("max_body_bytes", int),
            ("max_job_body_bytes", int),
            ("max_import_body_bytes", int),
            ("max_model_body_bytes", int),
            ("max_parses", int),
            ("parse_wait_s", float),
            ("parse_seconds_per_minute", float),
            ("max_tir_blocks", int),
            ("max_tir_bytes", int),
            ("max_streams_per_identity", int),
            ("max_streams", int),
            ("allowed_hosts", _names),
            ("trusted_proxies", _networks),
        ):
            raw = env.get(ENV_PREFIX + name.upper())
            if raw:
                values[name] = kind(raw)
        values.update({k: v for k, v in overrides.items() if v is not None})
        return replace(cls(), **values)

    @property
    def resolved_data_dir(self) -> Path:
        """The data folder as an absolute path."""
        return self.data_dir.expanduser().resolve()

    @property
    def store_url(self) -> str:
        """The SQLAlchemy URL of the store."""
        return self.database_url or f"sqlite:///{self.resolved_data_dir / 'tunehub.db'}"

    @property
    def broker(self) -> str:
        """The Celery broker URL."""
        return self.broker_url or f"sqla+sqlite:///{self.resolved_data_dir / 'broker.db'}"

    @property
    def blob_store(self) -> str:
        """Where artifact bytes live, ``artifact_store`` with "auto" resolved: "database" when
        the store is not SQLite (processes on other hosts reach it), else "directory"."""
        if self.artifact_store != "auto":
            return self.artifact_store
        return "directory" if self.store_url.startswith("sqlite") else "database"

    @property
    def artifacts(self) -> Path:
        """The artifact directory as an absolute path."""
        return (self.artifact_dir or self.resolved_data_dir / "artifacts").expanduser().resolve()

    @property
    def artifact_cache(self) -> Path:
        """Where an API process keeps verified local copies of database blobs."""
        return self.resolved_data_dir / "artifact-cache"

    def as_env(self) -> dict[str, str]:
        """These settings as ``TUNEHUB_*`` variables, for child processes (workers, API
        processes): paths and URLs resolved, every other field that is set as its text."""
        env = {
            ENV_PREFIX + "DATA_DIR": str(self.resolved_data_dir),
            ENV_PREFIX + "DATABASE_URL": self.store_url,
            ENV_PREFIX + "BROKER_URL": self.broker,
            ENV_PREFIX + "ARTIFACT_DIR": str(self.artifacts),
            ENV_PREFIX + "MAX_TRIALS": str(self.max_trials),
            ENV_PREFIX + "STALE_AFTER_S": str(self.stale_after_s),
            ENV_PREFIX + "HEARTBEAT_EVERY_S": str(self.heartbeat_every_s),
            ENV_PREFIX + "REAPER_EVERY_S": str(self.reaper_every_s),
            ENV_PREFIX + "REQUEUE_AFTER_S": str(self.requeue_after_s),
            ENV_PREFIX + "NUM_TRIALS_PER_ITER": str(self.num_trials_per_iter),
            **({ENV_PREFIX + "SEED": str(self.seed)} if self.seed is not None else {}),
        }
        for item in fields(self):
            value = getattr(self, item.name)
            if value is not None:
                if isinstance(value, bool):
                    text = "1" if value else "0"
                elif isinstance(value, tuple):
                    text = ",".join(value)
                else:
                    text = str(value)
                env.setdefault(ENV_PREFIX + item.name.upper(), text)
        return env
