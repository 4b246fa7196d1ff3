"""The answers a build's `TunehubDatabase` got from its server, kept on disk so that a rebuild
without network applies the same schedules (and says so).

``$XDG_CACHE_HOME/tunehub/lookups/<digest>.json`` (see `service.client.cache.cache_root`), one
file per (server URL, target as the build named it): the target's key and TVM series, when it
was last refreshed, and per workload hash the verified best as the server answered it (null:
nothing tuned). Every successful lookup merges its answers in (a later answer replaces an
earlier one); writes are atomic, and a merge holds an exclusive lock on a ``.lock`` file beside
it, so that builds running side by side (``make -j``) do not drop each other's answers.
"""

from __future__ import annotations

import fcntl
import json
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from schedule_reads import TunedSchedule
from service.client.cache import cache_root, key_digest, write_atomic
from service.client.reader import schedule_from_json


@dataclass(frozen=True)
class CachedLookups:
    """What a server answered for one target, as last saved."""

    target_key: str
    tvm_series: str
    fetched_at: str
    answers: dict[str, TunedSchedule | None]


class LookupCache:
    """The cached answers of one server for one target (as the build named it)."""

    def __init__(self, server_url: str, target: Any) -> None:
        self.path: Path = cache_root() / "lookups" / f"{key_digest([server_url, target])}.json"

    def load(self) -> CachedLookups | None:
        """The saved answers, or None (never saved, or unreadable: then it is ignored)."""
        try:
            body = json.loads(self.path.read_text())
            answers = {
                str(shash): None if best is None else schedule_from_json(best)
                for shash, best in body["answers"].items()
            }
            return CachedLookups(
                str(body["target_key"]), str(body["tvm_series"]), str(body["fetched_at"]), answers
            )
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None

    def save(
        self, target_key: str, tvm_series: str, answers: dict[str, TunedSchedule | None]
    ) -> None:
        """Merge ``answers`` into the saved ones (same key and series; else they replace)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path.with_suffix(".lock"), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
            self._merge(target_key, tvm_series, answers)

    def _merge(
        self, target_key: str, tvm_series: str, answers: dict[str, TunedSchedule | None]
    ) -> None:
        known = self.load()
        merged: dict[str, TunedSchedule | None] = {}
        if known is not None and (known.target_key, known.tvm_series) == (target_key, tvm_series):
            merged.update(known.answers)
        merged.update(answers)
        body = {
            "target_key": target_key,
            "tvm_series": tvm_series,
            "fetched_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "answers": {h: None if b is None else asdict(b) for h, b in merged.items()},
        }
        write_atomic(self.path, json.dumps(body).encode())
