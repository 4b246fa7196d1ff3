"""Everything that touches TVM, in floors by stage; a folder imports only the floors below it
(`tests/test_import_contracts.py` holds the rule):

1. `ir` (IRModule helpers) and `traces` (traces as the store keeps them);
2. `checks` (what is checked before a trace is replayed, a library loaded, TIR tuned or
   TVMScript parsed) and `hardware` (targets, this host, threads, vectors, peak, bandwidth);
3. `catalog` (operators and their workloads) and `models` (whole models, their pipeline);
4. `jail` (the isolation machinery);
5. `publish` (verification, packed layouts, the interchange format);
6. `measure` (the jailed kernel runner, RPC devices, timing);
7. `search` (spaces, seeds, the cost model, the builder and the loop);
8. `untrusted` (user input handled in the jail: its requests and their callers).

Imports neither `schedules_db` nor `service`, FastAPI or Celery: what the search needs from
storage it gets through the protocols of `tuning.search.storage`, which the worker
(`service.worker`) implements over the store."""
