"""What the processes of a deployment share: the worker registry, API tokens, dashboard
sessions, leases, and where the API processes read artifacts."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    String,
)
from sqlalchemy.orm import Mapped, mapped_column

from schedules_db.tables.base import Base, utcnow


class WorkerRow(Base):
    """A worker process: where it runs, which targets it serves, what hardware it has, and its
    heartbeat (a worker whose heartbeat is older than the stale limit is shown as stale)."""

    __tablename__ = "workers"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(255), unique=True, nullable=False)
    hostname: Mapped[str] = mapped_column(String(255), nullable=False)
    pid: Mapped[int] = mapped_column(Integer, nullable=False)
    target_ids: Mapped[list[int]] = mapped_column(JSON, nullable=False)
    fingerprint: Mapped[dict[str, Any]] = mapped_column(JSON, nullable=False, default=dict)
    rpc: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    current_job_id: Mapped[int | None] = mapped_column(Integer, nullable=True)
    started_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    heartbeat_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    stopped_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)


class ApiTokenRow(Base):
    """An API token of one identity (``name``): only the sha256 of the token's text is kept
    (the text is shown once, at creation; see `schedules_db.tokens`)."""

    __tablename__ = "api_tokens"
    __table_args__ = (Index("ix_api_tokens_name", "name"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(64), nullable=False)
    token_sha256: Mapped[str] = mapped_column(String(64), unique=True, nullable=False)
    scopes: Mapped[list[str]] = mapped_column(JSON, nullable=False)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    expires_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    revoked_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    last_used_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)


class DashboardSessionRow(Base):
    """A dashboard login: the sha256 of a random session id (the cookie's value), the token
    it was opened with (revoking the token ends it) and when it expires."""

    __tablename__ = "dashboard_sessions"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    session_sha256: Mapped[str] = mapped_column(String(64), unique=True, nullable=False)
    token_id: Mapped[int] = mapped_column(ForeignKey("api_tokens.id"), nullable=False)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False)


class LeaseRow(Base):
    """A named duty one process holds until ``expires_at`` (`schedules_db.store.leases`)."""

    __tablename__ = "leases"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    holder: Mapped[str] = mapped_column(String(255), nullable=False)
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False)


class ArtifactReaderRow(Base):
    """Where an API process reads artifacts, announced until ``fresh_until``
    (`schedules_db.store.artifact_readers`): a worker checks that it publishes there."""

    __tablename__ = "artifact_readers"

    process: Mapped[str] = mapped_column(String(255), primary_key=True)  # host:pid:nonce
    marker: Mapped[str] = mapped_column(String(64), nullable=False)  # the place it reads
    kind: Mapped[str] = mapped_column(String(16), nullable=False)  # "database" or "directory"
    hostname: Mapped[str] = mapped_column(String(255), nullable=False)
    path: Mapped[str] = mapped_column(String(1024), nullable=False)
    fresh_until: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False)
