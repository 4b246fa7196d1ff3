"""figures' interference: the other work (cores' worth) a target's peak and bandwidth were
measured beside (a figure measured under load yields no roofline)

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-07
"""

import sqlalchemy as sa
from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("targets") as batch:
        batch.add_column(sa.Column("peak_interference", sa.Float(), nullable=True))
        batch.add_column(sa.Column("bandwidth_interference", sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("targets") as batch:
        batch.drop_column("bandwidth_interference")
        batch.drop_column("peak_interference")
