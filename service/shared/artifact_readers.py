"""Do the workers publish artifacts where the API reads them? The API announces how it reads
(`ReaderAnnouncer`); a worker checks before it starts (`publishing_problem`).

An API process reads artifacts either from the database (``TUNEHUB_ARTIFACT_STORE`` resolves to
"database") or from its artifact directory. A directory is named by a marker file in it
(`MARKER_FILE`, a random name written once): a worker whose own artifact directory holds the same
marker writes where that API reads (the same folder, or a shared disk mounted on both hosts);
one that does not would publish libraries every replica answers 404 for. So a worker refuses to
start when any API process announced in the last few minutes reads elsewhere, and says what to
set. With no API announced (a worker started first) there is nothing to check against.
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
import threading
from datetime import timedelta
from pathlib import Path

from schedules_db.store import Store
from schedules_db.store.artifact_readers import ArtifactReader
from service.shared.settings import Settings

log = logging.getLogger("tunehub.artifacts")
MARKER_FILE = ".tunehub-reader"
DATABASE = "database"
MIN_FRESH_S = 60.0  # an announcement lasts at least this long, renewed 3 times in it


def directory_marker(folder: Path, create: bool) -> str | None:
    """The marker of an artifact directory: the text of its marker file, written first (with
    a random value, atomically) when ``create``; None when it has none and not ``create``."""
    path = folder / MARKER_FILE
    found = _read(path)
    if found or not create:
        return found or None
    folder.mkdir(parents=True, exist_ok=True)
    staged = folder / f".{MARKER_FILE}.{os.getpid()}.{threading.get_ident()}"
    staged.write_text(f"dir-{secrets.token_hex(16)}")
    try:
        os.link(staged, path)  # fails if another process wrote its marker first: use theirs
    except FileExistsError:
        if not _read(path):  # an empty file (a crash mid-write by hand): replace it
            os.replace(staged, path)
    except OSError:  # a file system without hard links: the rename may replace a racer's
        os.replace(staged, path)
    finally:
        staged.unlink(missing_ok=True)
    return _read(path) or None


def _read(path: Path) -> str:
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        return ""


def reader_of(settings: Settings) -> ArtifactReader | None:
    """How an API process with ``settings`` reads artifacts; None (logged) when its artifact
    directory has no marker and none can be written there (a read-only mount): then there
    is nothing a worker could compare, and nothing is announced."""
    host = socket.gethostname()
    process = f"{host}:{os.getpid()}:{secrets.token_hex(4)}"
    if settings.blob_store == DATABASE:
        return ArtifactReader(process, DATABASE, DATABASE, host, "")
    folder = settings.artifacts
    try:
        marker = directory_marker(folder, create=True)
    except OSError as err:
        marker = None
        log.warning("no marker in the artifact directory %s (%s): workers cannot check that "
                    "they publish there", folder, err)  # fmt: skip
    return ArtifactReader(process, marker, "directory", host, str(folder)) if marker else None


def _gone(reader: ArtifactReader) -> bool:
    """Whether the announcing process is known to have ended: on this host, with no process
    of its pid (an API killed before it withdrew)."""
    if reader.hostname != socket.gethostname():
        return False
    try:
        pid = int(reader.process.split(":")[-2])
        os.kill(pid, 0)
    except (ValueError, IndexError):
        return False
    except ProcessLookupError:
        return True
    except PermissionError:  # alive, another user's
        return False
    return False


def publishing_problem(settings: Settings, store: Store) -> str | None:
    """Why a worker with ``settings`` would publish artifacts that an API process announced in
    ``store`` cannot read, with what to set; None when every fresh reader reads where it writes."""
    writes = settings.blob_store
    own = None if writes == DATABASE else directory_marker(settings.artifacts, create=False)
    for reader in store.readers.fresh():
        if _gone(reader):
            continue
        where = f"the API on {reader.hostname}"
        if reader.kind == DATABASE and writes != DATABASE:
            return (
                f"{where} reads artifacts from the database, but this worker would write them "
                f"to the directory {settings.artifacts}: set TUNEHUB_ARTIFACT_STORE=database "
                f"for this worker (auto is the database on PostgreSQL)"
            )
        if reader.kind != DATABASE and writes == DATABASE:
            return (
                f"{where} reads artifacts from its directory {reader.path}, but this worker "
                f"would write them to the database: set TUNEHUB_ARTIFACT_STORE=database on the "
                f"API (every process of a fleet without a shared disk), or give this worker "
                f"TUNEHUB_ARTIFACT_STORE=directory with that directory mounted"
            )
        if reader.kind != DATABASE and own != reader.marker:
            return (
                f"{where} reads artifacts from its directory {reader.path}, and this worker's "
                f"directory {settings.artifacts} is not that one (its marker file "
                f"{MARKER_FILE} differs or is missing): mount the API's directory and point "
                f"TUNEHUB_ARTIFACT_DIR at it, or set TUNEHUB_ARTIFACT_STORE=database on every "
                f"process"
            )
    return None


class ReaderAnnouncer(threading.Thread):
    """A daemon thread of an API process that announces its `reader_of` every third of its
    freshness (``3 × reaper_every_s``, at least `MIN_FRESH_S`) until `stop`, which withdraws
    it. A store that cannot be reached only delays the announcement."""

    def __init__(self, store: Store, settings: Settings) -> None:
        super().__init__(name="tunehub-artifact-reader", daemon=True)
        self.store = store
        self.reader = reader_of(settings)
        self.fresh_for = timedelta(seconds=max(MIN_FRESH_S, 3 * settings.reaper_every_s))
        self.stopped = threading.Event()

    def announce(self) -> None:
        """Announce once (logging, not raising, a store error); nothing without a reader."""
        if self.reader is None:
            return
        try:
            self.store.readers.announce(self.reader, self.fresh_for)
        except Exception:  # noqa: BLE001 - the next period retries
            log.warning("could not announce where this API reads artifacts", exc_info=True)

    def run(self) -> None:
        every = self.fresh_for.total_seconds() / 3
        while not self.stopped.wait(every):
            self.announce()

    def stop(self) -> None:
        """End the renewals and withdraw the announcement (a store error is only logged)."""
        self.stopped.set()
        if self.is_alive():
            self.join(timeout=10)
        if self.reader is None:
            return
        try:
            self.store.readers.withdraw(self.reader.process)
        except Exception:  # noqa: BLE001 - it stops being fresh on its own
            log.warning("could not withdraw this API's artifact reader", exc_info=True)
