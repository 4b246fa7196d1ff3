"""user workloads have an owner: the identity that first submitted them (raw TIR, a model's
task, a build's task or an import); only the owner (or an admin) may import records for one

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-05
"""

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("workloads", schema=None) as batch_op:
        batch_op.add_column(sa.Column("owner", sa.String(length=128), nullable=True))
    # A user workload of an older store belongs to whoever submitted its first job.
    op.execute(
        "UPDATE workloads SET owner = (SELECT jobs.submitted_by FROM jobs "
        "WHERE jobs.workload_id = workloads.id ORDER BY jobs.id LIMIT 1) "
        "WHERE origin = 'user'"
    )


def downgrade() -> None:
    with op.batch_alter_table("workloads", schema=None) as batch_op:
        batch_op.drop_column("owner")
