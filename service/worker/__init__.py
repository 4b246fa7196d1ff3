"""The worker: the only place where `tuning` and `schedules_db` meet on the worker side.

`bootstrap.run_worker` registers the worker and its targets and consumes their queues; the
Celery task (`task`) wakes `runner.run_next`, which claims a job, searches through the
MetaSchedule `Database` over the store (`store_database`), verifies and publishes the best;
one `heartbeat` thread keeps the worker's registry row and its running job alive. Imports no
FastAPI and nothing of the API's routes.
"""
