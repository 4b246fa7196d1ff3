"""Artifact bytes kept in the database (blobs, in chunks), and each target's transferred cost
models."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import (
    BigInteger,
    DateTime,
    ForeignKey,
    Integer,
    LargeBinary,
    String,
    UniqueConstraint,
)
from sqlalchemy.orm import Mapped, mapped_column

from schedules_db.tables.base import Base, utcnow


class BlobRow(Base):
    """A file's bytes in the database artifact store (`schedules_db.blobs.database`), by sha256;
    written in one transaction with its `BlobChunkRow` rows, so it is whole or absent."""

    __tablename__ = "blobs"

    sha256: Mapped[str] = mapped_column(String(64), primary_key=True)
    size: Mapped[int] = mapped_column(BigInteger, nullable=False)
    chunks: Mapped[int] = mapped_column(Integer, nullable=False)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class BlobChunkRow(Base):
    """One chunk (at most `schedules_db.blobs.CHUNK_BYTES`) of a blob, in order of ``seq``."""

    __tablename__ = "blob_chunks"

    sha256: Mapped[str] = mapped_column(
        ForeignKey("blobs.sha256", ondelete="CASCADE"), primary_key=True
    )
    seq: Mapped[int] = mapped_column(Integer, primary_key=True)
    data: Mapped[bytes] = mapped_column(LargeBinary, nullable=False)


class CostModelRow(Base):
    """A target's transferred cost model (`tuning.search.cost_model`), trained on ``records``
    stored records, its archive in the artifact store."""

    __tablename__ = "cost_models"
    __table_args__ = (UniqueConstraint("target_key", "records", name="uq_cost_model_records"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    target_key: Mapped[str] = mapped_column(String(64), nullable=False)
    records: Mapped[int] = mapped_column(Integer, nullable=False)
    sha256: Mapped[str] = mapped_column(String(64), nullable=False)
    size: Mapped[int] = mapped_column(BigInteger, nullable=False)
    path: Mapped[str] = mapped_column(String(512), nullable=False)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
