"""`ScheduleReader` over HTTP: the server's verified bests, read the way a build needs them.

`RestScheduleReader` answers what `schedules_db.reader.SqlScheduleReader` answers on the
server (the same contract, `schedule_reads.ScheduleReader`), through ``POST /lookup`` (a whole
model's workloads in one request) and ``GET /top-records``. It is bound to one TVM series and
refuses a server of another: a trace is only ever replayed by the TVM series that measured it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from schedule_reads import ScheduleKey, ScheduleReader, TunedRecord, TunedSchedule
from service.client.http import TunehubClient, TunehubError


class SeriesMismatch(Exception):
    """The server keeps another TVM series than the reader is bound to."""


class RestScheduleReader(ScheduleReader):
    """`ScheduleReader` over a tunehub server, bound to ``tvm_series`` (e.g. the installed
    TVM's: `schedule_reads.tvm_series(tvm.__version__)`)."""

    def __init__(
        self, client: TunehubClient, tvm_series: str, allow_neighbour: bool = False
    ) -> None:
        """``allow_neighbour``: `lookup` also answers neighbour answers (``verified`` False)
        and records the hashes whose neighbour answer was withdrawn in ``withdrawn``."""
        super().__init__(tvm_series)
        self.client = client
        self.allow_neighbour = allow_neighbour
        self.withdrawn: set[str] = set()  # neighbour answers the service withdrew, so far
        self._server_series: str | None = None  # learnt from the first lookup answer

    def target_key(self, target: str | dict[str, Any]) -> str:
        """The key the server canonicalises ``target`` to ("host" is the server's host)."""
        answer = self.client.lookup(target, [])
        self._check_series(str(answer["tvm_series"]))
        return str(answer["target"]["key"])

    def top_k(self, workload_shash: str, target_key: str, k: int) -> list[TunedRecord]:
        if k <= 0:
            return []
        self._check_server_series()
        rows = self.client.top_records(workload_shash, target_key, k)
        return [_record(row) for row in rows]

    def lookup(self, target_key: str, workload_shashes: Sequence[str]) -> dict[str, TunedSchedule]:
        hashes = list(dict.fromkeys(workload_shashes))
        if not hashes:
            return {}
        try:
            answer = self.client.lookup(target_key, hashes, self.allow_neighbour)
        except TunehubError as err:
            if err.status == 422 and _names_target(err.detail):
                return {}  # a key the server has never stored: nothing tuned there
            raise
        self._check_series(str(answer["tvm_series"]))
        self.withdrawn.update(str(h) for h in answer.get("withdrawn", []))
        return {shash: schedule_from_json(body) for shash, body in answer["schedules"].items()}

    def _check_server_series(self) -> None:
        served = self._server_series
        if served is None:  # one request, the first time only
            served = str(self.client.lookup("host", [])["tvm_series"])
        self._check_series(served)

    def _check_series(self, served: str) -> None:
        self._server_series = served
        if served != self.tvm_series:
            raise SeriesMismatch(
                f"the server keeps TVM {served} schedules; this reader is bound to "
                f"{self.tvm_series}"
            )


def _names_target(detail: Any) -> bool:
    """True when a 422's detail is about the request's target."""
    if not isinstance(detail, list):
        return False
    return any(isinstance(e, dict) and e.get("type") == "invalid_target" for e in detail)


def _record(body: dict[str, Any]) -> TunedRecord:
    return TunedRecord(
        record_id=int(body["record_id"]),
        trace_json=str(body["trace_json"]),
        run_secs=[float(x) for x in body["run_secs"]],
        args_info=list(body["args_info"]),
        mean_run_us=float(body["mean_run_us"]),
        space=str(body["space"]),
        tvm_version=str(body["tvm_version"]),
    )


def schedule_from_json(body: dict[str, Any]) -> TunedSchedule:
    """A verified best as the API (or `dataclasses.asdict`) writes it."""
    key = body["key"]
    return TunedSchedule(
        schedule_id=int(body["schedule_id"]),
        key=ScheduleKey(str(key["workload_shash"]), str(key["target_key"]), str(key["tvm_series"])),
        latency_us=float(body["latency_us"]),
        space=str(body["space"]),
        packed_params=body["packed_params"],
        record=None if body["record"] is None else _record(body["record"]),
        provenance=str(body.get("provenance", "tuned")),
        verified=bool(body.get("verified", True)),
    )
