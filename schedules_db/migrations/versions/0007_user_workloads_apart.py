"""user-supplied workloads keyed apart from catalog ones; imported records marked

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-04
"""

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None
SHASH_UNIQUE = {"uq": "uq_%(table_name)s_%(column_0_name)s"}


def upgrade() -> None:
    # Rows of raw TIR carry no operator; everything else was built from the catalog.
    with op.batch_alter_table("workloads", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("origin", sa.String(length=16), nullable=False, server_default="catalog")
        )
    op.execute("UPDATE workloads SET origin = 'user' WHERE operator IS NULL")
    # 0001's unique(shash) is unnamed: PostgreSQL calls it workloads_shash_key; on SQLite the
    # naming convention gives the reflected constraint a name to drop.
    sqlite = op.get_bind().dialect.name == "sqlite"
    with op.batch_alter_table(
        "workloads", schema=None, naming_convention=SHASH_UNIQUE if sqlite else None
    ) as batch_op:
        batch_op.drop_constraint(
            "uq_workloads_shash" if sqlite else "workloads_shash_key", type_="unique"
        )
        batch_op.create_unique_constraint("uq_workload_origin", ["shash", "origin"])
    with op.batch_alter_table("tuning_records", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("unverified", sa.Boolean(), nullable=False, server_default=sa.false())
        )


def downgrade() -> None:
    with op.batch_alter_table("tuning_records", schema=None) as batch_op:
        batch_op.drop_column("unverified")
    with op.batch_alter_table("workloads", schema=None) as batch_op:
        batch_op.drop_constraint("uq_workload_origin", type_="unique")
        batch_op.create_unique_constraint("workloads_shash_key", ["shash"])
        batch_op.drop_column("origin")
