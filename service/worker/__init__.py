"""The worker: the only place where `tuning` and `schedules_db` meet on the worker side.

`bootstrap.run_worker` registers the worker and its targets and consumes their queues; the
Celery task (`task`) wakes `runner.run_next`, which claims a job and runs it by stage: its
inputs read once and its writes as owner (`job_store`), the search (`search_job`, through the
MetaSchedule `Database` over the store, `store_database`, and the warm start's reads,
`search_storage`), then the verification and publication of the best (`verification`). One
`heartbeat` thread keeps the worker's registry row and its running job alive and reports a job
another worker reclaimed. Imports no FastAPI and nothing of the API's routes.
"""
