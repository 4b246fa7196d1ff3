"""Exporting a target's records as a MetaSchedule JSON database (`ms.database.JSONDatabase`
opens it; `compile_tir` applies it)."""

from __future__ import annotations

import json

from schedules_db import Store
from service.app.admission import target_id_of
from service.app.refusals import NotFound
from service.app.responses.interchange import ExportOut, export_json
from service.app.rows import present
from tuning.publish.interchange import (
    encode_record_line,
    encode_workload_line,
)


def export_database(store: Store, target: str) -> ExportOut:
    """The successful records of the target named ``target`` (key, label, "host" or JSON) as
    the text of both files (`service.app.responses.interchange.ExportOut`); 404 for a target
    the store does not know, 422 for one tunehub refuses."""
    target_id = target_id_of(store, target)
    if target_id is None:
        raise NotFound("target", target)
    stored = present(store.catalog.get_target(target_id), f"target {target_id}")
    canonical = json.loads(stored.canonical_json)
    index: dict[int, int] = {}
    workload_lines: list[str] = []
    record_lines: list[str] = []
    for record in store.records.list_records(target_id):
        if record.mean_run_us is None:
            continue
        if record.workload_id not in index:
            workload = present(store.catalog.get_workload(record.workload_id), "workload")
            index[record.workload_id] = len(workload_lines)
            workload_lines.append(encode_workload_line(workload.shash, workload.mod_json))
        record_lines.append(
            encode_record_line(
                index[record.workload_id],
                record.trace_json,
                record.run_secs,
                canonical,
                record.args_info,
            )
        )
    return export_json(stored, store.series, workload_lines, record_lines)
