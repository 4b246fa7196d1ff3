"""user-supplied workloads keyed apart from catalog ones; imported records marked

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-04
"""

from alembic import op  # noqa: F401

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
