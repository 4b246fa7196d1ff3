"""A target's transferred cost model shared through the artifact store, not a shared disk.

`tuning.search.cost_model.refresh` works on a local folder (``<artifact_dir>/cost_models/<key>``).
Around it, `CostModelFiles.current` first downloads the store's newest model of the target into
that folder (verified), and afterwards stores a model this worker trained (its blob first, then
its `cost_models` row), so every worker of the target, on any host, starts from it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from schedules_db.blobs import BlobStore
from schedules_db.store import Store
from schedules_db.store.cost_models import CostModel
from tuning.search.cost_model import model_dir, refresh, trained_on
from tuning.search.storage import SearchStorage


class CostModelFiles:
    """The cost models of the store, with working copies under ``local_dir``."""

    def __init__(self, store: Store, blobs: BlobStore, local_dir: Path) -> None:
        self.store, self.blobs, self.local_dir = store, blobs, local_dir

    def current(
        self, storage: SearchStorage, target_key: str, target: Any, cores: int
    ) -> Path | None:
        """The local file of the target's current model (`refresh`: retrained when enough
        new records arrived), or None while the target has too few records."""
        shared = self.store.cost_models.newest(target_key)
        if shared is not None:
            local = model_dir(self.local_dir, target_key) / f"records-{shared.records}.tar"
            if not local.is_file():
                self.blobs.read_to(shared, local)
        path = refresh(storage, target_key, target, self.local_dir, cores)
        records = trained_on(path) if path is not None else None
        if (
            path is not None
            and records is not None
            and (shared is None or records > shared.records)
        ):
            stored = self.blobs.put(path, ".tar")
            self.store.cost_models.add(
                CostModel(target_key, records, stored.sha256, stored.size, stored.path)
            )
        return path
