"""dashboard: sessions (a login's cookie, hashed, tied to the token it was opened with) and
each target's measured FMA peak

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-04
"""

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("targets", sa.Column("peak_gflops", sa.Float(), nullable=True))
    op.create_table(
        "dashboard_sessions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("session_sha256", sa.String(length=64), nullable=False),
        sa.Column("token_id", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["token_id"], ["api_tokens.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("session_sha256"),
    )


def downgrade() -> None:
    op.drop_table("dashboard_sessions")
    op.drop_column("targets", "peak_gflops")
