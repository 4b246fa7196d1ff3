"""The read side of the schedule store, as a TVM build needs it: one interface, two homes.

`ScheduleReader` answers "the verified best schedule of this workload on this target", "the
k fastest records" and "the bests of a whole model's workloads in one round trip", bound to
one TVM series. `schedules_db.reader.SqlScheduleReader` implements it over SQL (held to the
contract by tests/schedules_db/test_reader.py) and the service serves it over HTTP; the light
client's HTTP implementation, on which a build's TVM `Database` stands
(`service.client.tvm_database`), needs nothing more than this package (MLflow keeps one
`AbstractStore` behind `SqlAlchemyStore` and `RestStore` the same way).

This package is the stdlib only (no SQLAlchemy, TVM or httpx): its value types
(`ScheduleKey`, `TunedSchedule`, `TunedRecord`) and the key spelling (`schedule_reads.keys`)
are shared by both sides without either importing the other.
"""

from schedule_reads.keys import canonical_json, sha256_hex, target_key, tvm_series
from schedule_reads.reader import ScheduleReader
from schedule_reads.values import ScheduleKey, TunedRecord, TunedSchedule

__all__ = [
    "ScheduleKey",
    "ScheduleReader",
    "TunedRecord",
    "TunedSchedule",
    "canonical_json",
    "sha256_hex",
    "target_key",
    "tvm_series",
]
