"""job stages: how long each search and verification took (the metrics' durations), and an
index on tuning_records.created_at (the metrics' trials per second)

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-07
"""

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "job_stages",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("job_id", sa.Integer(), sa.ForeignKey("jobs.id"), nullable=False),
        sa.Column("target_id", sa.Integer(), sa.ForeignKey("targets.id"), nullable=False),
        sa.Column("stage", sa.String(16), nullable=False),
        sa.Column("seconds", sa.Float(), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_records_created", "tuning_records", ["created_at"])


def downgrade() -> None:
    op.drop_index("ix_records_created", table_name="tuning_records")
    op.drop_table("job_stages")
