"""target labels are unique (duplicates mended with a suffix)

Before, a second target could take a label another target already had (the API derives labels
from the target and never checked), and the label then named several targets. Every target
after the first one (lowest id) with a label gets the suffix the store now gives a label that
is taken: its key's first 8 hex digits (more if those are taken too). Then a unique index.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-04
"""

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

LABEL_LENGTH = 128  # targets.label is VARCHAR(128)


def _suffixed(label: str, key: str) -> list[str]:
    """The labels tried for a target whose label is taken, shortest suffix first (as
    `schedules_db.keys.target_labels` without the label itself, frozen here)."""
    return [f"{label[: LABEL_LENGTH - n - 1]}-{key[:n]}" for n in (8, 12, 16, 24, 32)]


def upgrade() -> None:
    conn = op.get_bind()
    rows = conn.execute(sa.text("SELECT id, key, label FROM targets ORDER BY id")).all()
    taken = {label for _, _, label in rows}
    kept: set[str] = set()
    for target_id, key, label in rows:
        if label not in kept:  # the first target with this label keeps it
            kept.add(label)
            continue
        new = next(candidate for candidate in _suffixed(label, key) if candidate not in taken)
        conn.execute(
            sa.text("UPDATE targets SET label = :label WHERE id = :id"),
            {"label": new, "id": target_id},
        )
        taken.add(new)
        kept.add(new)
    op.create_index("ix_targets_label", "targets", ["label"], unique=True)


def downgrade() -> None:
    op.drop_index("ix_targets_label", table_name="targets")
