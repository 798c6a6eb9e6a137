"""Feedback and verification evidence, in the shared database.

Revision ID: 0001
Revises:
"""
import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "feedback",
        sa.Column("answer_id", sa.String(64), primary_key=True),
        sa.Column("source", sa.String(16), primary_key=True),
        sa.Column("rating", sa.String(8), nullable=False),
        sa.Column("comment", sa.Text, nullable=False, server_default=""),
        sa.Column("question", sa.Text, nullable=False, server_default=""),
        sa.Column("cards", sa.JSON, nullable=False),
        sa.Column("created", sa.String(32), nullable=False),
        sa.Column("updated", sa.String(32), nullable=False),
    )
    op.create_table(
        "evidence",
        sa.Column("topic", sa.String(128), primary_key=True),
        sa.Column("key", sa.String(64), primary_key=True),
        sa.Column("snippet_hash", sa.String(64), nullable=False),
        sa.Column("jax", sa.String(32)),
        sa.Column("backend", sa.String(16)),
        sa.Column("device_kind", sa.String(128)),
        sa.Column("node", sa.String(128)),
        sa.Column("date", sa.String(32), nullable=False),
        sa.Column("verdict", sa.String(32)),
        sa.Column("record", sa.JSON, nullable=False),
    )
    op.create_index("evidence_topic_date", "evidence", ["topic", "date"])


def downgrade() -> None:
    op.drop_index("evidence_topic_date", "evidence")
    op.drop_table("evidence")
    op.drop_table("feedback")
