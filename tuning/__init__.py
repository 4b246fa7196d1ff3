"""Everything that touches TVM: the operator catalog, targets, search, verification, export and
the job runner that a worker calls. Imports no FastAPI and no Celery."""
