"""HTTP plumbing used by the API (`service.api`) and the dashboard (`service.dashboard`) alone:
identities and tokens (`auth`, `sessions`), refusals and errors, body caps and rate limits
(`limits`, `shared_limits`), input checks (`strict_input`, `untrusted_input`, `quotas`), what a
request carries (`schemas`), the JSON answered (`builders`) and its shapes (`responses`), fast
JSON reads, allowed hosts and the OpenAPI document. Imports `service.shared` but never the
routes, the worker or the entry points."""
