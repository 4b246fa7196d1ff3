"""How a jailed child is started: the limits it runs under (`Limits`) and the command that
builds its jail (`jail_command`): ``unshare`` into new PID, mount, network, IPC and UTS
namespaces, then `tuning.jail.enter` as the namespaces' first process, which builds the
read-only root, drops to the child's own uid and executes the program. Shared by the one-shot
children of `tuning.jail.isolated` and the long-lived kernel runner of
`tuning.measure.kernel_jail`."""

from __future__ import annotations

import json
import secrets
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1]  # `tuning`, shown to every child
NAMESPACES = ("--pid", "--fork", "--mount", "--net", "--ipc", "--uts")
UID_RANGE = (1 << 20, 1 << 30)  # far above any account a distribution creates


def new_uid() -> int:
    """A random unprivileged uid for one child (no other process uses it)."""
    return secrets.randbelow(UID_RANGE[1] - UID_RANGE[0]) + UID_RANGE[0]


@dataclass(frozen=True)
class Limits:
    """What one child may use."""

    # A parse takes ~1.5 s of CPU, checking a big function a few more; a VM whose neighbours
    # slow its cores (the same loop measured at 0.39 to 1.46 s of CPU) once took a raw TIR
    # parse past 10 s.
    cpu_seconds: int = 20
    wall_seconds: float = 30.0
    address_space: int = 2 << 30  # per process (a conv2d parse peaks at 0.5 GiB virtual)
    tree_memory: int = 2 << 30  # the whole tree, where a memory cgroup can be made
    open_files: int = 256
    processes: int = 32  # per uid, and each child has a uid of its own: bounds a fork bomb
    file_size: int = 0  # the root is read-only anyway
    answer_bytes: int = 8 << 20  # a module's JSON; decoding costs the parent ~30x this
    stderr_bytes: int = 64 << 10
    tmp_bytes: int = 0  # a private tmpfs at /tmp of this size (0: no /tmp at all)
    threads: int = 1  # TVM's (and OpenMP's) thread pool: a compiled model is timed on these
    # A child whose whole tree uses less than a tenth of a CPU second over this many seconds
    # is idle (asleep, or blocked on nothing it will get) and is killed (0: never): a parse
    # works the CPU from its first instant, so only a child that waits to hold a slot idles.
    idle_seconds: float = 6.0
    gpu: bool = False  # the GPU's device nodes (and a /proc of the child's own) are shown

    def rlimits(self) -> dict[str, int]:
        """The limits as `resource` names (set by the jail before it drops privileges)."""
        return {
            "RLIMIT_CPU": self.cpu_seconds,
            "RLIMIT_AS": self.address_space,
            "RLIMIT_NOFILE": self.open_files,
            "RLIMIT_NPROC": self.processes,
            "RLIMIT_FSIZE": self.file_size,
            "RLIMIT_CORE": 0,
            "RLIMIT_MEMLOCK": 0,
        }


# A whole model (`tuning.untrusted.user_model`). Measured in the jail on this 2-core host
# (TVM 0.27, one thread): the tiny CNN of the tests imports and extracts in ~1 s and compiles
# (untuned + tuned, both run and timed) in ~1.7 s; a ResNet-18-shaped CNN (1x3x224x224, 11.7 M
# float32 weights, a 47 MB ONNX file, 19 tasks) takes 3.4 s of CPU and 510 MiB (peak RSS) to
# import and extract, and 29.5 s of CPU, 626 MiB and ~200 MB of /tmp to compile (two 47 MB
# libraries; each unscheduled run 1.7 s, five runs per build). The limits leave room for
# models a few times larger than ResNet-18 (a ResNet-50's 100 MB of weights, ~4x its FLOPs).
MODEL_IMPORT_LIMITS = Limits(  # also the second child, which re-derives every task
    cpu_seconds=120,
    wall_seconds=180.0,
    address_space=4 << 30,
    tree_memory=4 << 30,
    answer_bytes=32 << 20,  # every task's module JSON (ResNet-18's 19: well under 1 MB)
)
MODEL_COMPILE_LIMITS = Limits(
    cpu_seconds=600,
    wall_seconds=600.0,
    address_space=4 << 30,
    tree_memory=6 << 30,  # the processes, and /tmp's pages (a tmpfs is charged to its writer)
    file_size=1 << 30,  # per file: the exported library embeds the weights
    tmp_bytes=1 << 30,  # two exported libraries and g++'s objects
)


def visible_paths(extra: Sequence[Path] = ()) -> list[str]:
    """Host paths the child sees read-only: libraries, the Python installation, `tuning`,
    and ``extra`` (a directory of compiled kernels the caller fills)."""
    paths = ["/usr", "/bin", "/lib", "/lib64", "/etc/ld.so.cache"]
    for prefix in {sys.base_prefix, sys.prefix, sys.exec_prefix}:
        paths.append(str(Path(prefix).resolve()))
    paths.append(str(PACKAGE))
    paths.extend(str(Path(p).resolve()) for p in extra)
    return sorted(set(paths))


def start_jail(command: list[str]) -> subprocess.Popen[bytes]:
    """Start a `jail_command` with pipes on stdin, stdout and stderr, in a session of its own
    (so its whole group can be killed), with nothing of this process's environment or
    descriptors."""
    return subprocess.Popen(
        command,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={"PATH": "/usr/bin:/bin:/usr/sbin:/sbin"},
        start_new_session=True,
        close_fds=True,
    )


def jail_command(
    uid: int,
    limits: Limits,
    cgroups: Sequence[Path],
    program: str,
    output_dir: Path | None = None,
    extra_paths: Sequence[Path] = (),
) -> list[str]:
    """The command that runs ``program``'s ``main()`` in a jail as ``uid`` under ``limits``,
    inside ``cgroups``; ``output_dir`` is the host directory shown read-write at ``/out``,
    ``extra_paths`` more host paths shown read-only where they are."""
    package_root = str(PACKAGE.parent)
    bootstrap = (
        f"import sys; sys.path.insert(0, {package_root!r}); from {program} import main; main()"
    )
    config = {
        "paths": visible_paths(extra_paths),
        "uid": uid,
        "cgroups": [str(group) for group in cgroups],
        "limits": limits.rlimits(),
        "tmp_bytes": limits.tmp_bytes,
        "gpu": limits.gpu,
        "out": str(output_dir) if output_dir is not None else None,
        "argv": [sys.executable, "-I", "-B", "-c", bootstrap],
        "env": {
            "PATH": "/usr/bin:/bin",
            "HOME": "/",
            "LANG": "C.UTF-8",
            "OMP_NUM_THREADS": str(limits.threads),
            "TVM_NUM_THREADS": str(limits.threads),
            **({"TMPDIR": "/tmp"} if limits.tmp_bytes else {}),
        },
    }
    jail = str(Path(__file__).with_name("enter.py"))
    return [
        "unshare", *NAMESPACES, "--kill-child",
        "--", sys.executable, "-I", "-S", "-B", jail, json.dumps(config),
    ]  # fmt: skip
