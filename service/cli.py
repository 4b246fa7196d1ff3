"""The `tunehub` command line: serve, worker, token, submit, status, cancel, schedules, fetch."""

from __future__ import annotations

import argparse
import ipaddress
import json
import logging
import os
import signal
import socket
import sys
import uuid
from pathlib import Path
from typing import Any

from service import token_cli
from service.client import IntegrityError, TunehubClient, TunehubError
from service.settings import Settings
from service.supervisor import start_group, stop_group, supervise

BAR_WIDTH = 30


def _settings(args: argparse.Namespace) -> Settings:
    return Settings.from_env(
        data_dir=Path(args.data_dir) if getattr(args, "data_dir", None) else None,
        database_url=getattr(args, "database_url", None),
        broker_url=getattr(args, "broker_url", None),
        auth=getattr(args, "auth", None),
        anonymous_reads=getattr(args, "anonymous_reads", None),
    )


def _client(args: argparse.Namespace) -> TunehubClient:
    return TunehubClient(args.server, token=args.token)


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


def _parse_param(text: str) -> tuple[str, Any]:
    if "=" not in text:
        raise argparse.ArgumentTypeError(f"--param takes NAME=VALUE, got {text!r}")
    name, raw = text.split("=", 1)
    try:
        value: Any = json.loads(raw)
    except json.JSONDecodeError:
        value = raw
    return name.strip(), value


def cmd_serve(args: argparse.Namespace) -> int:
    """The API on host:port plus ``--workers`` local worker processes for the host target."""
    import uvicorn

    from service.app import create_app

    settings = _settings(args)
    refusal = serve_refusal(args.host, settings, args.insecure)
    if refusal:
        print(f"tunehub: {refusal}", file=sys.stderr)
        return 2
    settings.resolved_data_dir.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, **settings.as_env()}
    workers = [
        start_group(
            [
                sys.executable,
                "-m",
                "service.cli",
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
    print(f"tunehub: artifacts {settings.artifacts}", flush=True)
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
    serving = dict(host=args.host, port=args.port, log_level="info", access_log=args.access_log)
    try:
        if args.api_workers > 1:  # each process builds the app from the environment
            os.environ.update(settings.as_env())
            uvicorn.run("service.app:create_app", factory=True, workers=args.api_workers, **serving)
        else:
            uvicorn.run(create_app(settings), **serving)
    finally:
        for proc in workers:
            stop_group(proc)
    return 0


def _exit_on_signal(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)


def cmd_worker(args: argparse.Namespace) -> int:
    """A worker for the given targets (blocks until stopped). By default it runs supervised: a
    small parent process restarts it if it dies and kills what it left behind."""
    from tuning.devices import RpcSpec

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
        argv = [sys.executable, "-m", "service.cli", "worker", "--no-supervise", "--name", name]
        for target in args.target or ["host"]:
            argv += ["--target", target]
        if rpc is not None:
            argv += ["--rpc-tracker", args.rpc_tracker, "--rpc-key", args.rpc_key]
        return supervise(argv, {**os.environ, **_settings(args).as_env()})
    from service.jobqueue import run_worker

    logging.getLogger("tunehub.metaschedule").setLevel(logging.WARNING)
    logging.getLogger("tvm").setLevel(logging.WARNING)
    run_worker(_settings(args), args.target or ["host"], name=args.name, rpc=rpc)
    return 0


def _progress_line(job: dict[str, Any]) -> str:
    progress = job["progress"]
    done, total = progress["trials_done"], job["trials"]
    filled = int(BAR_WIDTH * min(done, total) / max(total, 1))
    bar = "#" * filled + "." * (BAR_WIDTH - filled)
    best = progress["best_latency_us"]
    best_text = f"best {best:.1f} us {progress['best_gflops']:.1f} GFLOPS" if best else "best -"
    return f"\r[{bar}] {done}/{total} trials  {best_text}  {job['state']:<9}"


def _target_arg(text: str) -> str | dict[str, Any]:
    """A --target value: a JSON object's text becomes the object; names pass through."""
    return json.loads(text) if text.strip().startswith("{") else text


def cmd_submit(args: argparse.Namespace) -> int:
    """Submit a job; with --wait, draw its progress and print the result."""
    params = dict(args.param or [])
    target = _target_arg(args.target)
    with _client(args) as client:
        who = {"priority": args.priority, "space": args.space}
        if args.tir:
            if args.operator:
                raise SystemExit("tunehub: give an operator or --tir FILE, not both")
            fmt = "json" if args.tir.endswith(".json") else "tvmscript"
            job = client.submit_tir(Path(args.tir).read_text(), fmt, target, args.trials, **who)
        elif args.operator:
            job = client.submit(args.operator, params, target, args.trials, **who)
        else:
            raise SystemExit("tunehub: give an operator name or --tir FILE")
        print(f"job {job['id']}: {job['state']}" + (" (cache hit)" if job["cache_hit"] else ""))
        if not args.wait:
            return 0
        return _follow(client, job["id"])


def _follow(client: TunehubClient, job_id: int) -> int:
    """Draw a job's progress bar from its event stream until it ends; print the result."""
    shown = [""]

    def draw(current: dict[str, Any]) -> None:
        line = _progress_line(current)
        if line != shown[0]:  # redraw only on change (logs stay readable when piped)
            print(line, end="", flush=True)
            shown[0] = line

    job = client.watch(job_id, on_progress=draw)
    print()
    if job["state"] != "succeeded":
        print(f"job {job['id']} {job['state']}: {job['error'] or ''}", file=sys.stderr)
        return 1
    sched = client.schedule(job["schedule_id"])
    print(
        f"schedule {sched['id']}: {sched['latency_us']:.2f} us, {sched['gflops']:.1f} GFLOPS, "
        f"{sched['speedup_vs_untuned']:.1f}x faster than untuned, "
        f"{sched['trials']} trials, max error {sched['max_abs_error']:.2g}, "
        f"{sched['space']} space"
    )
    for param in sched["packed_params"]:
        print(
            f"  weight {param['index']} ({param['name']}) is packed: call {param['function']} "
            f"once ({param['shape']} -> {param['packed_shape']}), then {sched['entry']} per call"
        )
    return 0


def cmd_watch(args: argparse.Namespace) -> int:
    """Follow a job's progress (server-sent events) until it ends."""
    with _client(args) as client:
        return _follow(client, args.job_id)


def cmd_workers(args: argparse.Namespace) -> int:
    """Print the worker fleet."""
    with _client(args) as client:
        for w in client.workers():
            targets = ",".join(t["label"] for t in w["targets"])
            job = f"job {w['current_job_id']}" if w["current_job_id"] else "idle"
            print(
                f"{w['name']:<40} {w['status']:<8} {targets:<24} {job:<10} "
                f"{w['fingerprint'].get('cpu_model', '')} (beat {w['heartbeat_age_s']} s ago)"
            )
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    """Write a target's records as a MetaSchedule JSON database folder."""
    with _client(args) as client:
        summary = client.export_database(args.target, args.directory)
    print(
        f"{args.directory}: {summary['workloads']} workloads, {summary['records']} records "
        f"for {summary['target']['label']} (TVM {summary['tvm_series']})"
    )
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    """Send a MetaSchedule JSON database folder measured on --target."""
    with _client(args) as client:
        summary = client.import_database(args.directory, _target_arg(args.target))
    jobs = ", ".join(str(j["id"]) for j in summary["jobs"]) or "none"
    print(
        f"{summary['workloads']} workloads, {summary['records_added']} new records "
        f"({summary['records_known']} known) for {summary['target']['label']}; "
        f"verification jobs: {jobs}"
    )
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    """Print a job as JSON."""
    with _client(args) as client:
        print(json.dumps(client.job(args.job_id), indent=2))
    return 0


def cmd_cancel(args: argparse.Namespace) -> int:
    """Cancel a job."""
    with _client(args) as client:
        job = client.cancel(args.job_id)
    print(
        f"job {job['id']}: {job['state']}"
        + (" (cancel requested)" if job["state"] == "running" else "")
    )
    return 0


def cmd_schedules(args: argparse.Namespace) -> int:
    """List verified best schedules."""
    with _client(args) as client:
        rows = client.schedules(args.operator, args.target)
    print(
        f"{'id':>4}  {'operator':<10} {'params':<28} {'target':<20} {'latency_us':>11} "
        f"{'GFLOPS':>8} {'speedup':>8} {'trials':>6} {'space':>6}"
    )
    for s in rows:
        params = ",".join(f"{k}={v}" for k, v in s["workload"]["params"].items())
        print(
            f"{s['id']:>4}  {s['workload']['operator'] or '-':<10} {params:<28} "
            f"{s['target']['label']:<20} {s['latency_us']:>11.2f} {s['gflops']:>8.1f} "
            f"{s['speedup_vs_untuned']:>7.1f}x {s['trials']:>6} {s['space']:>6}"
        )
    return 0


def cmd_fetch(args: argparse.Namespace) -> int:
    """Download a schedule's shared library (sha256-checked), or its JSON with --schedule."""
    with _client(args) as client:
        if args.schedule:
            text = json.dumps(client.schedule(args.schedule_id), indent=2)
            Path(args.output).write_text(text) if args.output else print(text)
            return 0
        output = args.output or f"schedule{args.schedule_id}.so"
        sha = client.download_artifact(args.schedule_id, output)
    print(f"{output}: sha256 {sha}")
    return 0


def cmd_whoami(args: argparse.Namespace) -> int:
    """Print who the token is (GET /me)."""
    with _client(args) as client:
        me = client.me()
    expires = me["expires_at"] or "never"
    print(
        f"{me['identity']}: {', '.join(me['scopes'])} (token {me['token_id']}, expires {expires})"
    )
    return 0


def cmd_operators(args: argparse.Namespace) -> int:
    """Print the operator catalog."""
    with _client(args) as client:
        for op in client.operators():
            params = ", ".join(op["params_schema"].get("properties", {}))
            dtypes = "/".join(op.get("dtypes", []))
            print(f"{op['name']:<18} {dtypes:<22} {op['description']}  [{params}]")
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of `tunehub`."""
    parser = argparse.ArgumentParser(prog="tunehub", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    def data_options(p: argparse.ArgumentParser) -> None:
        p.add_argument("--data-dir", help="data folder (default ./tunehub-data)")
        p.add_argument("--database-url", help="SQLAlchemy URL of the store")
        p.add_argument("--broker-url", help="Celery broker URL")

    def server_option(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--server", help="tunehub URL (default $TUNEHUB_URL or http://127.0.0.1:8000)"
        )
        p.add_argument("--token", help="API token (default $TUNEHUB_TOKEN)")

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
        help="with --auth, let GET routes answer without a token",
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
    p.set_defaults(func=cmd_serve)

    token_cli.add_parser(sub, data_options, _settings)

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
    p.set_defaults(func=cmd_worker)

    p = sub.add_parser("submit", help="submit a tuning job")
    p.add_argument("operator", nargs="?", help="a catalog operator (see `tunehub operators`)")
    p.add_argument("--tir", metavar="FILE", help="a raw TIR function: TVMScript, or .json")
    p.add_argument("--param", action="append", type=_parse_param, help="NAME=VALUE")
    p.add_argument("--target", default="host")
    p.add_argument("--trials", type=int, default=64)
    p.add_argument("--wait", action="store_true", help="follow progress until the job ends")
    p.add_argument("--priority", type=int, default=0, help="higher runs first (-100..100)")
    p.add_argument(
        "--space",
        choices=("auto", "plain", "packed"),
        default="auto",
        help="search space (auto: packed weights on CPU where the operator has them)",
    )
    p.add_argument("--submitted-by", help=argparse.SUPPRESS)  # ignored: the token says who
    server_option(p)
    p.set_defaults(func=cmd_submit)

    for name, func, help_text in (
        ("status", cmd_status, "show a job"),
        ("cancel", cmd_cancel, "cancel a job"),
        ("watch", cmd_watch, "follow a job's progress until it ends"),
    ):
        p = sub.add_parser(name, help=help_text)
        p.add_argument("job_id", type=int)
        server_option(p)
        p.set_defaults(func=func)

    p = sub.add_parser("schedules", help="list verified best schedules")
    p.add_argument("--operator")
    p.add_argument("--target", help="key, label or 'host'")
    server_option(p)
    p.set_defaults(func=cmd_schedules)

    p = sub.add_parser("fetch", help="download a schedule's compiled library")
    p.add_argument("schedule_id", type=int)
    p.add_argument("-o", "--output")
    p.add_argument("--schedule", action="store_true", help="fetch the schedule JSON instead")
    server_option(p)
    p.set_defaults(func=cmd_fetch)

    p = sub.add_parser("export", help="write a target's records as a MetaSchedule JSONDatabase")
    p.add_argument("directory")
    p.add_argument("--target", required=True, help="key, label, 'host' or JSON")
    server_option(p)
    p.set_defaults(func=cmd_export)

    p = sub.add_parser("import", help="load a MetaSchedule JSONDatabase folder for a target")
    p.add_argument("directory")
    p.add_argument("--target", required=True, help="what it was measured on: 'host', label, JSON")
    server_option(p)
    p.set_defaults(func=cmd_import)

    p = sub.add_parser("workers", help="list the worker fleet")
    server_option(p)
    p.set_defaults(func=cmd_workers)

    p = sub.add_parser("whoami", help="who the token is and what it may do")
    server_option(p)
    p.set_defaults(func=cmd_whoami)

    p = sub.add_parser("operators", help="list the operator catalog")
    server_option(p)
    p.set_defaults(func=cmd_operators)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `tunehub` console script."""
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except TunehubError as err:
        print(f"tunehub: {err}", file=sys.stderr)
        return 2
    except IntegrityError as err:
        print(f"tunehub: {err}", file=sys.stderr)
        return 3
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
