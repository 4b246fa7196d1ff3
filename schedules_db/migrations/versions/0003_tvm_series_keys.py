"""records and best schedules are keyed by TVM series (major.minor) too; a best may be the
plain function (no record)

A trace measured with one TVM series may not replay, or may replay differently, with another:
records and best schedules of different series are kept apart, and a lookup only sees those of
its own series.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-03
"""

import re

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def _series(version: str) -> str:
    match = re.match(r"(\d+)\.(\d+)", version or "")
    return f"{match.group(1)}.{match.group(2)}" if match else (version or "")


def upgrade() -> None:
    with op.batch_alter_table("tuning_records", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("tvm_series", sa.String(length=16), nullable=False, server_default="")
        )
    with op.batch_alter_table("schedules", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("tvm_series", sa.String(length=16), nullable=False, server_default="")
        )
    conn = op.get_bind()
    versions = conn.execute(sa.text("SELECT DISTINCT tvm_version FROM tuning_records")).all()
    for (version,) in versions:
        conn.execute(
            sa.text("UPDATE tuning_records SET tvm_series = :s WHERE tvm_version = :v"),
            {"s": _series(version), "v": version},
        )
    conn.execute(
        sa.text(
            "UPDATE schedules SET tvm_series = (SELECT r.tvm_series FROM tuning_records r "
            "WHERE r.id = schedules.record_id)"
        )
    )
    with op.batch_alter_table("tuning_records", schema=None) as batch_op:
        batch_op.drop_constraint("uq_record_trace", type_="unique")
        batch_op.create_unique_constraint(
            "uq_record_trace", ["workload_id", "target_id", "tvm_series", "trace_sha256"]
        )
    with op.batch_alter_table("schedules", schema=None) as batch_op:
        # The plain function can be the best (tiny kernels): a schedule without a record.
        batch_op.alter_column("record_id", existing_type=sa.Integer(), nullable=True)
        batch_op.drop_constraint("uq_schedule_pair", type_="unique")
        batch_op.create_unique_constraint(
            "uq_schedule_key", ["workload_id", "target_id", "tvm_series"]
        )


def downgrade() -> None:
    with op.batch_alter_table("schedules", schema=None) as batch_op:
        batch_op.drop_constraint("uq_schedule_key", type_="unique")
        batch_op.create_unique_constraint("uq_schedule_pair", ["workload_id", "target_id"])
        batch_op.alter_column("record_id", existing_type=sa.Integer(), nullable=False)
        batch_op.drop_column("tvm_series")
    with op.batch_alter_table("tuning_records", schema=None) as batch_op:
        batch_op.drop_constraint("uq_record_trace", type_="unique")
        batch_op.create_unique_constraint(
            "uq_record_trace", ["workload_id", "target_id", "trace_sha256"]
        )
        batch_op.drop_column("tvm_series")
