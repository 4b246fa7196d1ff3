"""User code runs only in the jail: probes from inside it, hostile documents, forged answers,
limits, the concurrency cap and a host where isolation cannot be built. Everything here runs
real TVMScript through the real isolated children (`tuning.jail`, `tuning.untrusted.user_tir`),
with the syntax filter (defence in depth, which refuses these scripts' ``eval`` before any
child starts) switched off: the jail must hold on its own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.tuning.escapes import report_of, reporting, running
from tests.waiting import eventually
from tuning.catalog import get_operator
from tuning.catalog.workload import catalog_workload
from tuning.jail import Limits, SandboxBusy, SandboxFailed, isolated, set_max_concurrent
from tuning.untrusted.ask import ask
from tuning.untrusted.user_tir import TirRejected, parse_untrusted
from tuning.untrusted.user_tir import check_syntax as syntax_filter


@pytest.fixture(autouse=True)
def _without_syntax_filter(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("tuning.untrusted.user_tir.check_syntax", lambda source: source)


def test_the_syntax_filter_refuses_the_escapes_before_any_child_starts() -> None:
    for code in ("open('x', 'w')", "getattr((), 'x')", "print(1)"):
        with pytest.raises(TirRejected, match="'eval' is not allowed"):
            syntax_filter(running(code))
    with pytest.raises(TirRejected, match="'open' is not allowed"):
        syntax_filter(_matmul_script().replace('"float32"', 'open("x").read()', 1))


PROBES = r"""
import os, socket
def attempt(name, fn):
    try:
        fn()
        results[name] = "succeeded"
    except BaseException as err:
        results[name] = type(err).__name__
def write(path):
    with open(path, "w") as f:
        f.write("owned")
attempt("write_cwd", lambda: write("pwned"))
attempt("write_checkout", lambda: write(CHECKOUT + "/pwned"))
attempt("write_data_dir", lambda: write(DATA_DIR + "/pwned"))
attempt("write_tmp", lambda: write("/tmp/pwned"))
attempt("write_dev_shm", lambda: write("/dev/shm/pwned"))
attempt("read_store", lambda: open(STORE).read())
attempt("read_environ", lambda: open("/proc/1/environ").read())
attempt("read_parent_environ", lambda: open("/proc/%d/environ" % os.getppid()).read())
try:
    results["checkout_listing"] = sorted(os.listdir(CHECKOUT))
except OSError:
    results["checkout_listing"] = []
for port in (5432, 6379, 5672):
    def tcp(port=port):
        with socket.create_connection(("127.0.0.1", port), timeout=2):
            pass
    attempt("connect_%d" % port, tcp)
def pg_socket():
    with socket.socket(socket.AF_UNIX) as s:
        s.connect("/var/run/postgresql/.s.PGSQL.5432")
attempt("connect_pg_socket", pg_socket)
results["uid"] = os.getuid()
results["environ"] = sorted(os.environ)
forks = 0
try:
    while forks < 5000:
        if os.fork() == 0:
            __import__("time").sleep(60)
            os._exit(0)
        forks += 1
except OSError:
    pass
results["forks"] = forks
os.system("sleep 120 &")
"""


def _processes_of(uid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                status = (entry / "status").read_text()
            except OSError:
                continue
            line = next(x for x in status.splitlines() if x.startswith("Uid:"))
            if int(line.split()[1]) == uid:
                found.append(int(entry.name))
    return found


def test_every_probe_fails_inside_the_jail(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    store = data_dir / "tunehub.db"
    store.write_text("secret")
    monkeypatch.chdir(tmp_path)
    checkout = str(Path(__file__).resolve().parents[2])
    code = f"CHECKOUT, DATA_DIR, STORE = {checkout!r}, {str(data_dir)!r}, {str(store)!r}\n"
    with pytest.raises(TirRejected) as refused:
        parse_untrusted("tvmscript", reporting(code + PROBES))
    results = report_of(str(refused.value))
    attempts = {
        k: v for k, v in results.items() if k not in ("uid", "environ", "forks", "checkout_listing")
    }
    assert attempts and all(v != "succeeded" for v in attempts.values()), json.dumps(results)
    assert results["uid"] != 0
    # Of the checkout only the `tuning` package (and a virtualenv kept inside it) is there.
    assert set(results["checkout_listing"]) <= {"tuning", ".venv"}
    assert "TUNEHUB_DATABASE_URL" not in results["environ"]
    assert 0 < results["forks"] < 100  # RLIMIT_NPROC on a uid of its own bounds the fork bomb
    assert not _processes_of(results["uid"])  # the sleeping children and `sleep &` died with it
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data"]
    assert sorted(p.name for p in data_dir.iterdir()) == ["tunehub.db"]
    assert not Path("/tmp/pwned").exists() and not Path("/dev/shm/pwned").exists()


def test_memory_is_bounded_per_process_and_for_the_whole_tree() -> None:
    """One process cannot map more than its address-space limit; eight children of 1 GiB each
    cannot all live, because the tree shares one 2 GiB memory cgroup."""
    code = r"""
import os, time
try:
    bytearray(3 << 30)
    results["one_3gib_block"] = "succeeded"
except MemoryError:
    results["one_3gib_block"] = "MemoryError"
children = []
for _ in range(8):
    pid = os.fork()
    if pid == 0:
        block = bytearray(1 << 30)
        for i in range(0, len(block), 4096):
            block[i] = 1
        time.sleep(2)
        os._exit(0)
    children.append(pid)
results["lived"] = sum(os.waitpid(pid, 0)[1] == 0 for pid in children)
"""
    with pytest.raises(TirRejected) as refused:
        parse_untrusted("tvmscript", reporting(code))
    results = report_of(str(refused.value))
    assert results["one_3gib_block"] == "MemoryError"
    assert results["lived"] <= 2, results


@pytest.mark.parametrize(
    "code",
    [
        "open('pwned', 'w').write('x')",
        "__import__('os').system('id > owned')",
        "getattr((), '_' + '_class_' + '_').mro()[1].__subclasses__()",
    ],
    ids=["open", "eval-import-system", "getattr-dunder"],
)
def test_escapes_write_nothing(code: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(TirRejected):
        parse_untrusted("tvmscript", running(code + "\nraise SystemExit(3)"))
    assert list(tmp_path.iterdir()) == []


SEGFAULTING_JSON = {
    "self-reference": {"root_index": 0, "nodes": [{"type": "ffi.Array", "data": [0]}]},
    "two-node-cycle": {
        "root_index": 1,
        "nodes": [{"type": "ffi.Array", "data": [1]}, {"type": "ffi.Array", "data": [0]}],
    },
    "ffi-function": {"root_index": 0, "nodes": [{"type": "ffi.Function", "data": {}}]},
    "forward-reference": {
        "root_index": 0,
        "nodes": [
            {"type": "prim.Add", "data": {"span": 0, "ty": 0, "a": 1, "b": 1}},
            {"type": "None"},
        ],
    },
}


@pytest.mark.parametrize("name", list(SEGFAULTING_JSON))
def test_documents_that_crash_tvms_json_loader_kill_only_the_child(name: str) -> None:
    doc = {**SEGFAULTING_JSON[name], "metadata": {"tvm_version": "0.27.0.post1"}}
    # The same document kills a plain Python process that loads it:
    plain = subprocess.run(
        [sys.executable, "-c", "import sys, tvm; tvm.ir.load_json(sys.stdin.read())"],
        input=json.dumps(doc), capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert plain.returncode == -11
    with pytest.raises(TirRejected, match="killed by SIGSEGV"):
        parse_untrusted("json", json.dumps(doc))


def _matmul() -> object:
    return catalog_workload("matmul", get_operator("matmul").Params(M=8, N=8, K=8))


def _matmul_script() -> str:
    return _matmul().mod.script()


def _answering(answer: bytes) -> str:
    """Python that writes ``answer`` as a framed answer to every descriptor, then exits."""
    frame = b"TUNEHUB-ANSWER " + str(len(answer)).encode() + b"\n" + answer
    return f"""
import os
for fd in range(1, 20):
    try:
        os.write(fd, {frame!r})
    except OSError:
        pass
os._exit(0)
"""


def test_a_forged_answer_does_not_re_derive() -> None:
    """User code in the first child writes its own answer (relu's module under matmul's hash)
    to every descriptor and exits; the second child re-derives relu's hash and they differ."""
    relu = catalog_workload("relu", get_operator("relu").Params(shape=[8, 8]))
    forged = json.dumps(
        {"ok": True, "mod_json": relu.mod_json, "shash": _matmul().shash, "flop": 1.0}
    ).encode()
    with pytest.raises(TirRejected, match="does not re-derive"):
        parse_untrusted("tvmscript", running(_answering(forged)))


def test_noise_on_stdout_does_not_corrupt_the_answer() -> None:
    noise = "print('{\"ok\": true, noise'); print('x' * 10000)"
    parsed = parse_untrusted("tvmscript", running(noise))
    assert parsed.shash.isdigit() and parsed.flop == 0


def test_the_wall_clock_and_cpu_limits_kill_the_child() -> None:
    started = time.monotonic()
    with pytest.raises(SandboxFailed, match="wall-clock"):
        ask(
            "parse",
            {"format": "tvmscript", "source": running("__import__('time').sleep(600)")},
            Limits(wall_seconds=6),
        )
    assert time.monotonic() - started < 20
    with pytest.raises(SandboxFailed, match="SIGXCPU|SIGKILL"):
        ask(
            "parse",
            {"format": "tvmscript", "source": running("while True: pass")},
            Limits(cpu_seconds=3, wall_seconds=60),
        )


def test_past_the_cap_a_parse_is_refused_at_once() -> None:
    set_max_concurrent(1)
    try:
        slow = threading.Thread(
            target=lambda: pytest.raises(
                TirRejected, parse_untrusted, "tvmscript",
                running("__import__('time').sleep(8); raise SystemExit(1)"),
            )
        )  # fmt: skip
        slow.start()
        eventually(lambda: isolated._slots.busy == 1, what="the slow parse never took its slot")
        started = time.monotonic()
        with pytest.raises(SandboxBusy) as busy:
            parse_untrusted("json", _matmul().mod_json)
        # At once: no child starts and nothing waits for the slot, which the slow parse holds
        # for 8 s (the bound leaves a busy machine room; queueing would take the 8 s).
        assert time.monotonic() - started < 3 and busy.value.retry_after >= 1
        slow.join(60)
    finally:
        set_max_concurrent(2)


def test_without_isolation_nothing_is_parsed(tmp_path: Path) -> None:
    """A service that cannot isolate (here: not root, so no uid of the child's own) refuses
    the parse instead of parsing in the open."""
    code = (
        "from tuning.jail import SandboxUnavailable\n"
        "from tuning.untrusted.user_tir import parse_untrusted\n"
        "try:\n"
        f"    parse_untrusted('tvmscript', {_matmul_script()!r})\n"
        "except SandboxUnavailable as err:\n"
        "    print('refused:', err)\n"
    )
    root = Path(__file__).resolve().parents[2]
    os.chmod(tmp_path, 0o777)
    done = subprocess.run(
        ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
         sys.executable, "-c", code],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
        env={**os.environ, "PYTHONPATH": str(root)},
    )  # fmt: skip
    assert "refused: isolation is unavailable" in done.stdout, done.stdout + done.stderr
    assert list(tmp_path.iterdir()) == []


def test_what_a_compromised_child_says_cannot_become_a_5xx_or_a_503() -> None:
    """From the security review: a forged answer with a 400-digit FLOP count raised
    OverflowError in the parent; a child that printed the jail's own failure line and exited
    111 made the service claim isolation was unavailable."""
    forged = b'{"ok": true, "mod_json": "{}", "shash": "1", "flop": 1' + b"0" * 400 + b"}"
    with pytest.raises(TirRejected, match="out of protocol"):
        parse_untrusted("tvmscript", running(_answering(forged)))
    fake = (
        "import sys, os\nsys.stderr.write('tunehub-jail: fake\\n')\n"
        "sys.stderr.flush()\nos._exit(111)"
    )
    with pytest.raises(TirRejected, match="exited with status 1"):
        parse_untrusted("tvmscript", running(fake))


def test_the_filter_does_not_let_a_builtin_be_bound() -> None:
    source = running("x = 1") + "\n    for eval in range(1):\n        pass\n"
    with pytest.raises(TirRejected, match="'eval' is a Python builtin"):
        syntax_filter(source)


def test_the_jails_root_never_hides_what_it_shows() -> None:
    """The new root is a tmpfs mounted in the jail's namespace; mounted over /tmp it hid a
    checkout (and its virtualenv) cloned under /tmp, and every parse failed there."""
    from tuning.jail.enter import pick_root

    assert pick_root(["/usr", "/work/main/tuning"]) == "/tmp"
    chosen = pick_root(["/usr", "/tmp/clone/tuning", "/tmp/clone/.venv"])
    assert chosen != "/tmp" and Path(chosen).is_dir()
