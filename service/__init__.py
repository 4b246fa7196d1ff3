"""The tunehub service, grouped by who uses each part (the arrows run down only; the import
contract test, tests/test_import_contracts.py, enforces them):

* `service.entry`: the commands, the assembled app and the reaper (the top);
* `service.api` (REST routes and their use cases) and `service.dashboard` (HTML pages);
* `service.web`: HTTP plumbing both of those use;
* `service.worker`: the Celery worker (never HTTP);
* `service.shared`: what the API side and the worker share (settings, queue, targets);
* `service.client`: the light client a build imports (httpx and TVM only).
"""
