"""The API's use cases: what a request asks the service to do, one module each, between the
thin routes (parse, call, answer) and the store.

* `dispatch`: hand a queued job to the broker, with the fallback when the broker is down (the
  reaper sends it later); the reaper's resend uses the same step;
* `create_job`, `cancel_job`, `import_database`, `export_database`: one route's work each.

A use case takes the store, the queue and the settings as arguments (the routes get them from
`service.api.deps`) and raises the API's errors (`service.web.errors`,
`service.web.refusals`) where a request is refused, so a route adds nothing to them.
"""
