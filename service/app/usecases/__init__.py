"""The use cases: what a request (or the service itself) asks the service to do, one module
each, between the callers (the thin routes of `service.api`: convert, call, answer; the
dashboard; the reaper; the worker) and the store.

* `dispatch`: hand a queued job to the broker, with the fallback when the broker is down (the
  reaper sends it later); the reaper's resend uses the same step;
* `cancel`: cancel a job or a model, for the API, the dashboard, the worker and the reaper;
* `create_job`, `create_model`, `tune_missing`, `import_database`, `export_database`,
  `best_schedule`, `neighbour_answers`: one route's work each.

A use case takes the store, the queue and the settings as arguments (the routes get them from
`service.api.deps`), plain values for the request (its own dataclasses, not HTTP bodies), and
raises `service.app.refusals` where a request is refused; `service.web.refused` answers them,
so a route adds nothing to them.
"""
