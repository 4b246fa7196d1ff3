"""neighbour answers: unverified, refitted schedules for untuned workloads

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-05
"""

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "neighbour_answers",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("workload_id", sa.Integer(), nullable=False),
        sa.Column("target_id", sa.Integer(), nullable=False),
        sa.Column("tvm_series", sa.String(length=16), nullable=False),
        sa.Column("neighbour_schedule_id", sa.Integer(), nullable=False),
        sa.Column("neighbour_workload_id", sa.Integer(), nullable=False),
        sa.Column("trace_json", sa.Text(), nullable=False),
        sa.Column("args_info", sa.JSON(), nullable=False),
        sa.Column("latency_us", sa.Float(), nullable=False),
        sa.Column("space", sa.String(length=16), nullable=False),
        sa.Column("tvm_version", sa.String(length=32), nullable=False),
        sa.Column("packed_params", sa.JSON(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("job_id", sa.Integer(), nullable=True),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["job_id"], ["jobs.id"]),
        sa.ForeignKeyConstraint(["neighbour_schedule_id"], ["schedules.id"]),
        sa.ForeignKeyConstraint(["neighbour_workload_id"], ["workloads.id"]),
        sa.ForeignKeyConstraint(["target_id"], ["targets.id"]),
        sa.ForeignKeyConstraint(["workload_id"], ["workloads.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint(
            "workload_id",
            "target_id",
            "tvm_series",
            "neighbour_schedule_id",
            name="uq_neighbour_answer",
        ),
    )
    op.create_index(
        "ix_neighbour_answers_lookup",
        "neighbour_answers",
        ["target_id", "workload_id"],
        unique=False,
    )


def downgrade() -> None:
    op.drop_index("ix_neighbour_answers_lookup", table_name="neighbour_answers")
    op.drop_table("neighbour_answers")
