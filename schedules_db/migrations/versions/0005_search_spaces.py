"""search spaces: which space a job searches, a record came from, a best was found in, and the
packed weight layouts a best's artifact expects

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-03
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def _space() -> sa.Column[str]:
    return sa.Column("space", sa.String(length=16), nullable=False, server_default="plain")


def upgrade() -> None:
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.add_column(_space())
    with op.batch_alter_table("tuning_records", schema=None) as batch_op:
        batch_op.add_column(_space())
    with op.batch_alter_table("schedules", schema=None) as batch_op:
        batch_op.add_column(_space())
        batch_op.add_column(sa.Column("packed_params", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("schedules", schema=None) as batch_op:
        batch_op.drop_column("packed_params")
        batch_op.drop_column("space")
    with op.batch_alter_table("tuning_records", schema=None) as batch_op:
        batch_op.drop_column("space")
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_column("space")
