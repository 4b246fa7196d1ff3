"""targets: measured cache and memory bandwidth; workloads: the bytes a kernel must move;
models: the trials held back for the tasks furthest from their roofline

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-05
"""

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("targets", schema=None) as batch_op:
        batch_op.add_column(sa.Column("cache_gbps", sa.Float(), nullable=True))
        batch_op.add_column(sa.Column("memory_gbps", sa.Float(), nullable=True))
        batch_op.add_column(sa.Column("cache_bytes", sa.BigInteger(), nullable=True))
    with op.batch_alter_table("workloads", schema=None) as batch_op:
        batch_op.add_column(sa.Column("bytes_moved", sa.BigInteger(), nullable=True))
    with op.batch_alter_table("models", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("reserve_trials", sa.Integer(), nullable=False, server_default="0")
        )


def downgrade() -> None:
    with op.batch_alter_table("models", schema=None) as batch_op:
        batch_op.drop_column("reserve_trials")
    with op.batch_alter_table("workloads", schema=None) as batch_op:
        batch_op.drop_column("bytes_moved")
    with op.batch_alter_table("targets", schema=None) as batch_op:
        batch_op.drop_column("cache_bytes")
        batch_op.drop_column("memory_gbps")
        batch_op.drop_column("cache_gbps")
