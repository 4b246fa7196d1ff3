"""`tunehub serve` and `tunehub worker`: the commands that run on a server host (the API with
its local workers, a worker for some targets), and the rule that keeps an unauthenticated API
on loopback."""

from __future__ import annotations

import argparse
import ipaddress
import logging
import os
import shutil
import signal
import socket
import sys
import tempfile
import uuid
from collections.abc import Callable
from dataclasses import replace

from service.entry.supervisor import start_group, stop_group, supervise
from service.entry.top_level import clash_refusal
from service.shared.settings import Settings


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def serve_refusal(host: str, settings: Settings, insecure: bool) -> str | None:
    """Why `serve` must not start, or None: without auth it listens on loopback only, unless
    forced with ``--insecure``."""
    if settings.auth or insecure or _is_loopback(host):
        return None
    return (
        f"refusing to serve on {host} without auth: anyone who reaches it could submit and "
        "cancel jobs. Turn auth on (--auth or TUNEHUB_AUTH=1, then `tunehub token create`), "
        "listen on 127.0.0.1, or pass --insecure"
    )


def cmd_serve(args: argparse.Namespace, settings: Settings) -> int:
    """The API on host:port plus ``--workers`` local worker processes for the host target."""
    import uvicorn

    from service.entry.app import create_app
    from service.web.allowed_hosts import WILDCARD_ADDRESSES, allowed_hosts
    from service.web.request_ids import uvicorn_log_config

    refusal = clash_refusal() or serve_refusal(args.host, settings, args.insecure)
    if refusal:
        print(f"tunehub: {refusal}", file=sys.stderr)
        return 2
    if args.workers:
        from tuning.jail import unavailable_reason

        if reason := unavailable_reason():  # its workers would refuse to start
            print(
                f"tunehub: local workers run kernels only in a jail, and isolation is "
                f"unavailable here: {reason} (run as root, or serve with --workers 0)",
                file=sys.stderr,
            )
            return 2
    if args.host not in WILDCARD_ADDRESSES:  # the address it listens on is a name it answers to
        settings = replace(settings, allowed_hosts=(*settings.allowed_hosts, args.host))
    settings.resolved_data_dir.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, **settings.as_env()}
    workers = [
        start_group(
            [
                sys.executable,
                "-m",
                "service.entry.cli",
                "worker",
                "--target",
                "host",
                "--name",
                f"local{i}-{os.getpid()}@{os.uname().nodename}",
            ],
            env,
        )
        for i in range(args.workers)
    ]
    print(f"tunehub: store {settings.store_url}", flush=True)
    print(f"tunehub: broker {settings.broker}", flush=True)
    where = "the database" if settings.blob_store == "database" else settings.artifacts
    print(f"tunehub: artifacts in {where}", flush=True)
    names = ", ".join(allowed_hosts(settings.allowed_hosts))
    print(f"tunehub: answers to Host {names} (TUNEHUB_ALLOWED_HOSTS adds names)", flush=True)
    if settings.auth:
        reads = "anonymous reads allowed" if settings.anonymous_reads else "reads need a token"
        print(f"tunehub: auth ON (bearer tokens; {reads})", flush=True)
    else:
        print(
            "tunehub: auth OFF: every client is 'local' with every scope"
            + (" (--insecure: NOT on loopback)" if not _is_loopback(args.host) else ""),
            flush=True,
        )
    print(
        f"tunehub: {args.workers} local worker(s); API on http://{args.host}:{args.port}",
        flush=True,
    )
    # uvicorn re-raises SIGTERM after its graceful shutdown; turn it into SystemExit so that
    # the workers below are stopped instead of being orphaned.
    signal.signal(signal.SIGTERM, _exit_on_signal)
    # proxy_headers off: uvicorn would believe X-Forwarded-For from 127.0.0.1, where anyone on
    # this host connects from; the app believes it only from trusted_proxies (service.web.forwarded)
    serving = dict(
        host=args.host,
        port=args.port,
        log_level="info",
        log_config=uvicorn_log_config(),  # every line with its request id
        access_log=args.access_log,
        proxy_headers=False,
    )
    metrics_dir = None
    try:
        if args.api_workers > 1:  # each process builds the app from the environment
            os.environ.update(settings.as_env())
            metrics_dir = _shared_metrics_dir(settings)
            uvicorn.run(
                "service.entry.app:create_app", factory=True, workers=args.api_workers, **serving
            )
        else:
            uvicorn.run(create_app(settings), **serving)
    finally:
        for proc in workers:
            stop_group(proc)
        if metrics_dir is not None:
            shutil.rmtree(metrics_dir, ignore_errors=True)
    return 0


def _shared_metrics_dir(settings: Settings) -> str | None:
    """Where the API processes add up their request counts (service.web.metrics):
    ``PROMETHEUS_MULTIPROC_DIR`` as the operator set it (None returned: it is theirs), else a
    fresh folder under the data folder, set for the processes uvicorn starts (returned, to be
    removed at exit)."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        return None
    made = tempfile.mkdtemp(prefix="metrics-", dir=settings.resolved_data_dir)
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = made
    print(f"tunehub: API processes count requests together in {made}", flush=True)
    return made


def _exit_on_signal(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)


def cmd_worker(args: argparse.Namespace, settings: Settings) -> int:
    """A worker for the given targets (blocks until stopped). By default it runs supervised: a
    small parent process restarts it if it dies and kills what it left behind."""
    from tuning.measure.devices import RpcSpec

    if refusal := clash_refusal():
        print(f"tunehub: {refusal}", file=sys.stderr)
        return 2
    rpc = None
    if args.rpc_tracker or args.rpc_key:
        try:
            rpc = RpcSpec.parse(args.rpc_tracker or "", args.rpc_key or "")
        except ValueError as err:
            raise SystemExit(f"tunehub: {err}") from None
        if not args.target or "host" in args.target:
            raise SystemExit("tunehub: an RPC worker needs --target with the device's JSON target")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    if args.supervise:
        # The same worker, restarted under the same name, with settings passed by environment.
        name = args.name or f"tunehub-{uuid.uuid4().hex[:8]}@{socket.gethostname()}"
        argv = [
            sys.executable,
            "-m",
            "service.entry.cli",
            "worker",
            "--no-supervise",
            "--name",
            name,
        ]
        for target in args.target or ["host"]:
            argv += ["--target", target]
        if rpc is not None:
            argv += ["--rpc-tracker", args.rpc_tracker, "--rpc-key", args.rpc_key]
        return supervise(argv, {**os.environ, **settings.as_env()})
    from service.worker.bootstrap import run_worker

    logging.getLogger("tunehub.metaschedule").setLevel(logging.WARNING)
    logging.getLogger("tvm").setLevel(logging.WARNING)
    run_worker(settings, args.target or ["host"], name=args.name, rpc=rpc)
    return 0


def add_parsers(
    sub: argparse._SubParsersAction[argparse.ArgumentParser],
    data_options: Callable[[argparse.ArgumentParser], None],
    settings_of: Callable[[argparse.Namespace], Settings],
) -> None:
    """Add ``serve`` and ``worker`` to the `tunehub` parser (``settings_of``: a command's
    settings from its flags and the environment)."""
    p = sub.add_parser("serve", help="run the API and local workers")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--workers", type=int, default=1)
    p.add_argument(
        "--auth",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="require API tokens (default $TUNEHUB_AUTH, else off)",
    )
    p.add_argument(
        "--anonymous-reads",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="with --auth, let GET routes and POST /lookup answer without a token",
    )
    p.add_argument(
        "--insecure", action="store_true", help="allow a non-loopback --host without auth"
    )
    p.add_argument(
        "--api-workers",
        type=int,
        default=1,
        help="API processes on the port (uvicorn workers; each has its own parse cap)",
    )
    p.add_argument(
        "--access-log",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="log every request (~12%% of a lookup's cost)",
    )
    data_options(p)
    p.set_defaults(func=lambda args: cmd_serve(args, settings_of(args)))

    p = sub.add_parser("worker", help="run a worker for some targets")
    p.add_argument("--target", action="append", help='"host" or a JSON target; repeatable')
    p.add_argument("--name", help="worker name (default tunehub-<random>@<hostname>)")
    p.add_argument("--rpc-tracker", metavar="HOST:PORT", help="measure through a TVM RPC tracker")
    p.add_argument("--rpc-key", help="the device key registered with the tracker")
    p.add_argument(
        "--no-supervise",
        dest="supervise",
        action="store_false",
        help="run the worker in this process (no restart, no clean-up of what it leaves)",
    )
    data_options(p)
    p.set_defaults(func=lambda args: cmd_worker(args, settings_of(args)))
