"""artifact readers: where each API process reads artifacts, so a worker can check it
publishes there

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-07
"""

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "artifact_readers",
        sa.Column("process", sa.String(255), primary_key=True),
        sa.Column("marker", sa.String(64), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("hostname", sa.String(255), nullable=False),
        sa.Column("path", sa.String(1024), nullable=False),
        sa.Column("fresh_until", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("artifact_readers")
