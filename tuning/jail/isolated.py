"""Run one request on untrusted input in a fresh, isolated child process; trust nothing it says.

`run_isolated(program, request, payload)` starts the jail (`tuning.jail.enter`) under
``unshare`` — new PID, mount, network, IPC and UTS namespaces — which drops to an
unprivileged uid of its own and executes ``program`` (`tuning.untrusted.child` for user
input). The payload goes in on stdin; the answer comes back as one frame on stdout
(``TUNEHUB-ANSWER <length>\\n<JSON>``), read up to a size cap; anything the
request's own code prints goes to stderr, kept only in part for diagnostics. At the wall-clock
limit the whole tree is killed: ``unshare`` dies, its child (the namespace's PID 1) has a
parent-death signal, and with PID 1 the kernel kills every process of the namespace; a sweep
over the child's uid follows. Each child serves one request and exits.

Contract: at most `max_concurrent` children per process run at once; a request past that
waits for a slot, first come first served, up to the process's ``wait_s`` (0 by default: not
at all; at most `MAX_WAITING` requests wait), then raises `SandboxBusy`. Where isolation
cannot be built (not root, no ``unshare``, a seccomp profile that forbids namespaces) every
call raises `SandboxUnavailable`: untrusted input is then refused, never handled unisolated.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import selectors
import shutil
import signal
import stat
import subprocess
import threading
import time
from collections import deque
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tuning.jail.cgroups import kill_uid, make_cgroups, remove_cgroups, uid_cpu_seconds
from tuning.jail.spawn import (
    MODEL_COMPILE_LIMITS,
    MODEL_IMPORT_LIMITS,
    NAMESPACES,
    Limits,
    jail_command,
    new_uid,
    start_jail,
)

log = logging.getLogger("tunehub.sandbox")
FRAME = b"TUNEHUB-ANSWER "
JAIL_FAILED = 111
IDLE_CPU_SECONDS = 0.1  # what an idle child's tree may use in `Limits.idle_seconds`
MAX_WAITING = 8  # requests waiting for a slot (each holds a server thread while it waits)
__all__ = ["MODEL_COMPILE_LIMITS", "MODEL_IMPORT_LIMITS", "Limits"]  # re-exported


class SandboxError(Exception):
    """Base of the sandbox's failures."""


class SandboxUnavailable(SandboxError):
    """Isolation cannot be built on this machine; the input was not handled."""


class SandboxBusy(SandboxError):
    """Every sandbox slot of this process is taken; try again after ``retry_after`` s."""

    def __init__(self, retry_after: int) -> None:
        super().__init__(f"all isolated parsers are busy; retry in {retry_after} s")
        self.retry_after = retry_after


class SandboxFailed(SandboxError):
    """The child died, overran a limit or answered out of protocol (``reason`` says which)."""


@dataclass
class _Slots:
    limit: int = 2
    wait_s: float = 0.0  # how long a request waits for a slot before `SandboxBusy`
    busy: int = 0
    queue: deque[object] = field(default_factory=deque)  # the waiting requests, in order
    turn: threading.Condition = field(default_factory=threading.Condition)
    held: threading.local = field(default_factory=threading.local)  # this thread's `holding`

    def take(self) -> bool:
        """A slot, waiting up to `wait_s` behind the requests that came first; False if none."""
        with self.turn:
            if not self.queue and self.busy < self.limit:
                self.busy += 1
                return True
            if self.wait_s <= 0 or len(self.queue) >= MAX_WAITING:
                return False
            me = object()
            self.queue.append(me)
            try:
                mine = self.turn.wait_for(
                    lambda: self.queue[0] is me and self.busy < self.limit, self.wait_s
                )
                if mine:
                    self.busy += 1
                return mine
            finally:
                self.queue.remove(me)
                self.turn.notify_all()  # the next in line may go (or moves up)

    def give(self) -> None:
        with self.turn:
            self.busy -= 1
            self.turn.notify_all()


_slots = _Slots()


@contextmanager
def holding_slot(retry_after: int = 8) -> Iterator[None]:
    """Hold one sandbox slot for every `run_isolated` call this thread makes inside (a parse
    and its re-derivation, a workload and the replay of its traces): no other request takes
    the slot between them, so nothing paid for is lost to a 429 halfway. Waits for one as
    `set_max_concurrent` says; `SandboxBusy` if none came free."""
    if getattr(_slots.held, "slot", False):
        yield
        return
    if not _slots.take():
        raise SandboxBusy(retry_after)
    _slots.held.slot = True
    try:
        yield
    finally:
        _slots.held.slot = False
        _slots.give()


def set_max_concurrent(count: int, wait_s: float = 0.0) -> None:
    """How many isolated children this process runs at once (the API's ``max_parses``), and
    how long a request waits for a slot, first come first served (``parse_wait_s``; 0: a
    request past the cap is refused at once)."""
    with _slots.turn:
        _slots.limit = max(1, count)
        _slots.wait_s = max(0.0, wait_s)
        _slots.turn.notify_all()


def slots_busy() -> int:
    """How many slots of this process are held now."""
    with _slots.turn:
        return _slots.busy


def unavailable_reason() -> str | None:
    """Why isolation cannot be built here, or None when it can. Probed once per process with
    the real namespaces (a seccomp profile or a missing capability refuses them there)."""
    if os.geteuid() != 0:
        return "the service does not run as root, so it cannot give a child a uid of its own"
    return _namespaces_refused()


@functools.cache
def _namespaces_refused() -> str | None:
    if shutil.which("unshare") is None:
        return "util-linux's unshare is not installed"
    probe = subprocess.run(
        ["unshare", *NAMESPACES, "--", "true"], capture_output=True, text=True, timeout=30
    )
    if probe.returncode != 0:
        return f"the kernel refuses new namespaces here ({probe.stderr.strip()[:200]})"
    return None


def _collect(
    proc: subprocess.Popen[bytes], payload: bytes, limits: Limits, uid: int | None = None
) -> tuple[bytes, bytes, str | None]:
    """(stdout, stderr tail, why it was stopped or None), feeding ``payload`` to stdin. With
    ``uid`` (the child's), a tree that stays idle for `Limits.idle_seconds` is stopped too."""
    deadline = time.monotonic() + limits.wall_seconds
    out, err = bytearray(), bytearray()
    selector = selectors.DefaultSelector()
    assert proc.stdin and proc.stdout and proc.stderr
    try:
        proc.stdin.write(payload)
        proc.stdin.close()
    except BrokenPipeError:
        pass
    busy = _IdleWatch(uid, limits.idle_seconds) if uid is not None and limits.idle_seconds else None
    selector.register(proc.stdout, selectors.EVENT_READ, out)
    selector.register(proc.stderr, selectors.EVENT_READ, err)
    stopped = None
    while selector.get_map():
        left = deadline - time.monotonic()
        if left <= 0:
            stopped = f"ran past its wall-clock limit of {limits.wall_seconds:g} s"
            break
        for key, _ in selector.select(timeout=min(left, 1.0)):
            chunk = os.read(key.fd, 1 << 16)
            if not chunk:
                selector.unregister(key.fileobj)
                continue
            key.data.extend(chunk)
        if len(out) > limits.answer_bytes + 64:
            stopped = f"answered more than {limits.answer_bytes} bytes"
            break
        if len(err) > limits.stderr_bytes:
            del err[: len(err) - limits.stderr_bytes]
        if busy is not None and busy.idle():
            stopped = f"stayed idle for {limits.idle_seconds:g} s"
            break
    selector.close()
    return bytes(out), bytes(err), stopped


class _IdleWatch:
    """Samples the CPU time of a child's uid; `idle` once a whole window of ``seconds`` added
    less than `IDLE_CPU_SECONDS` (a sleeping child holding a slot others wait for)."""

    def __init__(self, uid: int, seconds: float) -> None:
        self.uid, self.seconds = uid, seconds
        self.samples: deque[tuple[float, float]] = deque()

    def idle(self) -> bool:
        now = time.monotonic()
        if self.samples and now - self.samples[-1][0] < 0.5:
            return False
        used = uid_cpu_seconds(self.uid)
        if self.samples and used < self.samples[-1][1]:  # processes ended (their time went)
            self.samples.clear()
        self.samples.append((now, used))
        while len(self.samples) > 1 and now - self.samples[1][0] >= self.seconds:
            self.samples.popleft()
        start, first = self.samples[0]
        return now - start >= self.seconds and used - first < IDLE_CPU_SECONDS


def _decode(out: bytes) -> dict[str, Any]:
    if not out.startswith(FRAME) or b"\n" not in out:
        raise SandboxFailed("the isolated child answered out of protocol")
    header, body = out.split(b"\n", 1)
    try:
        length = int(header[len(FRAME) :])
    except ValueError:
        raise SandboxFailed("the isolated child answered out of protocol") from None
    if length != len(body):
        raise SandboxFailed("the isolated child's answer is not the length it announced")
    try:
        answer = json.loads(body)
    except (ValueError, RecursionError, OverflowError):
        raise SandboxFailed("the isolated child's answer is not JSON") from None
    if not isinstance(answer, dict):
        raise SandboxFailed("the isolated child's answer is not a JSON object")
    return answer


def _death(code: int, stderr: bytes) -> str:
    if code == JAIL_FAILED and b"tunehub-jail:" in stderr:
        line = stderr.decode(errors="replace").strip().splitlines()[-1]
        raise SandboxUnavailable(f"isolation could not be built: {line}")
    if code < 0 or code > 128:
        number = -code if code < 0 else code - 128
        try:
            name = signal.Signals(number).name
        except ValueError:
            name = f"signal {number}"
        hint = {"SIGXCPU": " (its CPU-time limit)",
                "SIGXFSZ": " (its file-size limit)",
                "SIGKILL": " (its CPU-time or memory limit)"}.get(name, "")  # fmt: skip
        return f"the isolated child was killed by {name}{hint}"
    return f"the isolated child exited with status {code}"


def run_isolated(
    program: str,
    request: str,
    payload: dict[str, Any],
    limits: Limits | None = None,
    output_dir: Path | None = None,
    output_files: Sequence[str] = (),
) -> dict[str, Any]:
    """Run ``request`` of ``program`` (a module whose ``main()`` serves one framed request, as
    `tuning.untrusted.child` does) on ``payload`` in a fresh jail; its JSON answer.

    With ``output_dir`` (a new or empty directory) the child sees it read-write at ``/out``
    holding one empty file per name of ``output_files`` that it may write (up to
    ``limits.file_size`` each) and nothing else: the directory stays the parent's, so the
    child can neither add, remove nor replace entries, and its disk use is bounded. Once the
    child is gone every file is checked (a plain file, one link, within the size) and given
    back to this process's uid, mode 0644.

    Raises `SandboxBusy`, `SandboxUnavailable`, or `SandboxFailed` (crash, limit, protocol).
    The answer is only as trustworthy as the input: callers check what they key on.
    """
    limits = limits or Limits()
    reason = unavailable_reason()
    if reason:
        raise SandboxUnavailable(f"isolation is unavailable: {reason}")
    if output_dir is not None and not output_files:
        raise ValueError("an output directory needs the names of the files the child writes")
    with holding_slot(retry_after=max(1, int(limits.wall_seconds // 4))):
        return _run(program, request, payload, limits, output_dir, tuple(output_files))


def _prepare_outputs(output_dir: Path, names: tuple[str, ...], uid: int) -> None:
    """``output_dir`` owned by this process (mode 0755), with an empty file per name that
    only ``uid`` may write."""
    if any(not name or "/" in name or name in (".", "..") for name in names):
        raise ValueError(f"output file names must be plain names: {names}")
    output_dir.mkdir(mode=0o755, exist_ok=True)
    if output_dir.is_symlink() or any(output_dir.iterdir()):
        raise ValueError(f"{output_dir} must be a new or empty directory")
    os.chown(output_dir, os.geteuid(), os.getegid())
    output_dir.chmod(0o755)
    for name in names:
        fd = os.open(output_dir / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            os.fchown(fd, uid, uid)
        finally:
            os.close(fd)


def _reclaim_outputs(output_dir: Path, names: tuple[str, ...], limits: Limits) -> None:
    """Every output file a plain, singly linked file within ``limits.file_size``, owned by
    this process again (which clears any set-id bit) and mode 0644; `SandboxFailed` if not."""
    for name in names:
        fd = os.open(output_dir / name, os.O_RDONLY | os.O_NOFOLLOW)
        try:
            info = os.fstat(fd)
            os.fchown(fd, os.geteuid(), os.getegid())
            os.fchmod(fd, 0o644)
        finally:
            os.close(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:
            raise SandboxFailed(f"the isolated child left {name} as something else than a file")
        if info.st_size > limits.file_size:
            raise SandboxFailed(f"the isolated child wrote more than {limits.file_size} bytes")


def _run(
    program: str,
    request: str,
    payload: dict[str, Any],
    limits: Limits,
    output_dir: Path | None,
    output_files: tuple[str, ...],
) -> dict[str, Any]:
    uid = new_uid()
    cgroups: list[Path] = []
    if output_dir is not None:
        output_dir = output_dir.resolve()
        _prepare_outputs(output_dir, output_files, uid)
    try:
        cgroups = make_cgroups(uid, limits.tree_memory, limits.processes)
        proc = start_jail(jail_command(uid, limits, cgroups, program, output_dir=output_dir))
        try:
            body = json.dumps({"request": request, **payload}).encode()
            out, err, stopped = _collect(proc, body, limits, uid)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
            code = proc.wait()
            kill_uid(uid)
    finally:
        remove_cgroups(cgroups)
        if output_dir is not None:
            _reclaim_outputs(output_dir, output_files, limits)
    if stopped:
        raise SandboxFailed(f"the isolated child {stopped} and was killed")
    if code != 0:
        raise SandboxFailed(_death(code, err))
    return _decode(out)
