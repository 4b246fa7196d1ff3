"""HTTP plumbing used by the API (`service.api`) and the dashboard (`service.dashboard`) alone:
identities and tokens (`auth`, `sessions`), refusals and errors, the application layer's
refusals answered (`refused`), body caps and rate limits (`limits`, `shared_limits`), input
checks (`strict_input`, `quotas`), what a request carries (`schemas`), fast JSON reads, allowed
hosts and the OpenAPI document. Imports `service.app` and `service.shared` but never the routes,
the worker or the entry points."""
