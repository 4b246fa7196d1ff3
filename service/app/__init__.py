"""The application layer, between the entry points (the REST routes, the dashboard, the reaper,
the worker) and the transports: use cases (`usecases`), read views (`views`), one module per
response resource with its TypedDicts and their builders (`responses`), domain refusals
(`refusals`), the caller (`actors`), target naming and admission (`admission`), user code parsed
in isolation and strict JSON.

It imports `service.shared`, `schedules_db`, `schedule_reads`, `tuning` and pydantic, never HTTP
(`service.web`, FastAPI, Starlette) nor a role that calls it: a refusal is a
`service.app.refusals.Refused`, which `service.web.refused` answers with the API's status and
body."""
