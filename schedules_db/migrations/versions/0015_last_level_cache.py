"""targets: the bandwidth a worker measured in the shared last-level cache, and its size

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-06
"""

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("targets", schema=None) as batch_op:
        batch_op.add_column(sa.Column("llc_gbps", sa.Float(), nullable=True))
        batch_op.add_column(sa.Column("llc_bytes", sa.BigInteger(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("targets", schema=None) as batch_op:
        batch_op.drop_column("llc_bytes")
        batch_op.drop_column("llc_gbps")
