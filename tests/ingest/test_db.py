"""The database's migrations: the cheap at-head check agrees with Alembic, and a new SQLite file
is created at head while a file already at head is opened without running Alembic."""
from __future__ import annotations

import sys

from sqlalchemy import text

from jaxmem.core import db
from jaxmem.core.settings import Settings


def test_head_read_from_the_files_is_alembics_head():
    from alembic.script import ScriptDirectory

    assert db.head_revision() == ScriptDirectory(str(db._MIGRATIONS)).get_current_head()


def test_a_new_database_is_migrated_and_an_existing_one_is_not_touched_again(tmp_path, monkeypatch):
    settings = Settings(data_dir=tmp_path)
    url = db.url_of(settings)
    monkeypatch.setattr(db, "_engines", {})
    with db.engine(settings).connect() as con:
        assert con.execute(text("SELECT version_num FROM alembic_version")).scalar() == db.head_revision()
        assert {"feedback", "evidence"} <= set(con.execute(text("SELECT name FROM sqlite_master")).scalars())
    # A second process (a fresh engine cache) finds the file at head: Alembic is not even imported.
    monkeypatch.setattr(db, "_engines", {})
    for name in [m for m in sys.modules if m == "alembic" or m.startswith("alembic.")]:
        monkeypatch.delitem(sys.modules, name)
    db.engine(settings, url=url)
    assert "alembic.command" not in sys.modules
