"""a model's precision: "float32" (as written) or "bfloat16" (matmuls and convolutions on bf16
operands, float32 sums), and a bf16 model's lowest cosine similarity to float32 when compiled;
every model before it was float32

Revision ID: 0022
Revises: 0021
Create Date: 2026-12-07
"""

import sqlalchemy as sa
from alembic import op

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("models") as batch:
        batch.add_column(
            sa.Column("precision", sa.String(16), nullable=False, server_default="float32")
        )
        batch.add_column(sa.Column("min_cosine", sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("models") as batch:
        batch.drop_column("min_cosine")
        batch.drop_column("precision")
