"""a model's layout: "plain" (convs as written) or "blocked" (NCHW[x]c kept between layers);
every model before it was plain

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-07
"""

import sqlalchemy as sa
from alembic import op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("models") as batch:
        batch.add_column(sa.Column("layout", sa.String(16), nullable=False, server_default="plain"))


def downgrade() -> None:
    with op.batch_alter_table("models") as batch:
        batch.drop_column("layout")
