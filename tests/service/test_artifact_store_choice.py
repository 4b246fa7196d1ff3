"""Where artifacts live when nothing says: the database on a network database (so a fleet
built with only the database and broker URLs works, `tests/e2e/test_replicas.py`), the
directory on SQLite; an explicit setting wins, and "auto" says so when it leaves files of an
artifact directory unread."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from schedules_db import make_engine
from schedules_db.blobs import DatabaseBlobs, DirectoryBlobs
from service.shared.artifact_files import open_blob_store
from service.shared.settings import Settings

PG = "postgresql+psycopg://tunehub@db.example/tunehub"


def test_auto_is_the_database_on_a_network_database_and_the_directory_on_sqlite(
    tmp_path: Path,
) -> None:
    assert Settings(data_dir=tmp_path).blob_store == "directory"
    assert Settings(data_dir=tmp_path, database_url=PG).blob_store == "database"
    explicit = Settings(data_dir=tmp_path, database_url=PG, artifact_store="directory")
    assert explicit.blob_store == "directory"
    assert Settings(data_dir=tmp_path, artifact_store="database").blob_store == "database"
    with pytest.raises(ValueError, match="auto"):
        Settings(data_dir=tmp_path, artifact_store="s3")


def test_auto_on_a_network_database_opens_it_and_names_unread_files(
    pg_database: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    engine = make_engine(pg_database)
    try:
        settings = Settings(data_dir=tmp_path, database_url=pg_database)
        with caplog.at_level(logging.WARNING, "tunehub.artifacts"):
            assert isinstance(open_blob_store(settings, engine), DatabaseBlobs)
        assert not caplog.records  # no directory: nothing to say
        (settings.artifacts / "ab").mkdir(parents=True)
        (settings.artifacts / "ab" / "old.so").write_bytes(b"x")
        with caplog.at_level(logging.WARNING, "tunehub.artifacts"):
            assert isinstance(open_blob_store(settings, engine), DatabaseBlobs)
        assert "tunehub artifacts migrate" in caplog.text and str(settings.artifacts) in caplog.text
        local = Settings(data_dir=tmp_path)
        assert isinstance(open_blob_store(local, engine), DirectoryBlobs)
    finally:
        engine.dispose()
