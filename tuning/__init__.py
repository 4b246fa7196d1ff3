"""Everything that touches TVM, grouped by the stage of a job: `catalog` (operators and their
workloads), `hardware` (targets, devices, threads, intrinsics), `search` (the space, seeds, the
cost model, the builder and the loop), `publish` (verification, packed layouts,
JSON database files) and `sandbox` (user input checked and parsed in isolation). `ir` holds the
IRModule helpers they share. Imports neither `schedules_db` nor `service`, FastAPI or Celery:
what the search needs from storage it gets through the protocols of `tuning.search.storage`,
which the worker (`service.worker`) implements over the store."""
