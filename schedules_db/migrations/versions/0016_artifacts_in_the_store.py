"""blobs in the database, cost models indexed, and leases: a fleet with no shared disk

``blobs`` + ``blob_chunks`` hold artifact bytes when the artifact store is the database
(content-addressed by sha256, in chunks so no side holds a whole file); ``cost_models`` names
each target's transferred cost model by the blob that holds it; ``leases`` lets exactly one API
replica run the reaper.

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-06
"""

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "blobs",
        sa.Column("sha256", sa.String(64), primary_key=True),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("chunks", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_table(
        "blob_chunks",
        sa.Column(
            "sha256",
            sa.String(64),
            sa.ForeignKey("blobs.sha256", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("seq", sa.Integer(), primary_key=True),
        sa.Column("data", sa.LargeBinary(), nullable=False),
    )
    if op.get_bind().dialect.name == "postgresql":
        # Libraries barely compress: storing chunks uncompressed makes reads and writes faster.
        op.execute("ALTER TABLE blob_chunks ALTER COLUMN data SET STORAGE EXTERNAL")
    op.create_table(
        "cost_models",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("target_key", sa.String(64), nullable=False),
        sa.Column("records", sa.Integer(), nullable=False),
        sa.Column("sha256", sa.String(64), nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("path", sa.String(512), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("target_key", "records", name="uq_cost_model_records"),
    )
    op.create_table(
        "leases",
        sa.Column("name", sa.String(64), primary_key=True),
        sa.Column("holder", sa.String(255), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("leases")
    op.drop_table("cost_models")
    op.drop_table("blob_chunks")
    op.drop_table("blobs")
