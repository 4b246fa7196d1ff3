"""a target's bf16 peak: the unit that reached it ("amx" or "avx512_bf16"), its GFLOPS and the
other work its cores saw meanwhile; NULL where no worker measured one (or the target has none)

Revision ID: 0021
Revises: 0020
Create Date: 2026-12-07
"""

import sqlalchemy as sa
from alembic import op

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("targets") as batch:
        batch.add_column(sa.Column("bf16_unit", sa.String(16), nullable=True))
        batch.add_column(sa.Column("bf16_peak_gflops", sa.Float(), nullable=True))
        batch.add_column(sa.Column("bf16_interference", sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("targets") as batch:
        batch.drop_column("bf16_interference")
        batch.drop_column("bf16_peak_gflops")
        batch.drop_column("bf16_unit")
