"""The jail: the first program inside a sandbox's fresh namespaces; standard library only.

`tuning.jail.spawn.jail_command` starts ``unshare --pid --fork --kill-child --mount --net
--ipc --uts`` with this file as the namespaces' first process (as root, still in the host's
file system). It builds a read-only root of its own, moves into it, drops to an unprivileged
uid that no other process uses, sets the resource limits, and runs the untrusted-input
program as its child, staying PID 1 to report how that child ended. What the program can see
afterwards, read-only and nothing else: ``/usr`` (with ``/bin`` and ``/lib*``),
``/etc/ld.so.cache``, the Python installation, the `tuning` package, and ``/dev/null``,
``/dev/zero``, ``/dev/random`` and ``/dev/urandom``; where the caller asks, a private tmpfs
of bounded size at ``/tmp``, one host directory read-write at ``/out`` (see
`tuning.jail.isolated.run_isolated`), more host directories read-only (a kernel runner's
libraries) and, for a GPU target, the NVIDIA device nodes with a ``/proc`` of its own. No
``/proc`` otherwise, no ``/dev/shm``, data directory, checkout, socket directory or network
(the new network namespace holds only a loopback device that is down). Exit status 111 with
a line on stderr means the jail itself could not be built (the caller reports isolation as
unavailable).
"""

from __future__ import annotations

import ctypes
import json
import os
import resource
import signal
import sys

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_SET_NO_NEW_PRIVS = 1, 4, 38
JAIL_FAILED = 111
# Mount points for the new root (the tmpfs on it is this namespace's alone): the first that
# exists and holds none of the paths to show, which it would hide (a checkout under /tmp).
ROOT_CANDIDATES = ("/tmp", "/mnt", "/media", "/srv", "/opt", "/var/tmp", "/run", "/home")
DEVICES = ("null", "zero", "urandom", "random")

libc = ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _mount(source: str | None, target: str, fstype: str | None, flags: int,
           data: str | None = None) -> None:  # fmt: skip
    def enc(text: str | None) -> bytes | None:
        return None if text is None else text.encode()

    _check(libc.mount(enc(source), enc(target), enc(fstype), flags, enc(data)), f"mount {target}")


def pick_root(paths: list[str]) -> str:
    """Where to build the new root: a directory that is none of ``paths`` nor above one."""
    for candidate in ROOT_CANDIDATES:
        covers = any(p == candidate or p.startswith(candidate + "/") for p in paths)
        if os.path.isdir(candidate) and not os.path.islink(candidate) and not covers:
            return candidate
    raise OSError(f"no mount point for the jail's root among {', '.join(ROOT_CANDIDATES)}")


def _bind_read_only(path: str, new_root: str) -> None:
    """Make ``path`` of the host visible at the same path inside the new root, read-only."""
    inside = new_root + path
    if os.path.islink(path) and os.path.dirname(path) == "/":  # merged-/usr links: /lib -> usr/lib
        os.symlink(os.readlink(path), inside)
        return
    if os.path.isdir(path):
        os.makedirs(inside, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(inside), exist_ok=True)
        open(inside, "w").close()  # noqa: SIM115 - an empty file to mount on
    _mount(path, inside, None, MS_BIND | MS_REC)
    _mount(None, inside, None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)


def build_root(
    paths: list[str], tmp_bytes: int = 0, out: str | None = None, gpu: bool = False
) -> None:
    """A read-only root holding ``paths`` (and a few device nodes); chroot into it. With
    ``tmp_bytes``, a private tmpfs of that size at ``/tmp``; with ``out``, that host directory
    read-write (no devices, set-id bits or execution) at ``/out``; with ``gpu``, the NVIDIA
    device nodes and a read-only ``/proc`` of this PID namespace (the CUDA driver reads it)."""
    new_root = pick_root(paths + ([out] if out else []))
    _mount(None, "/", None, MS_REC | MS_PRIVATE)  # nothing below propagates to the host
    _mount("tmpfs", new_root, "tmpfs", MS_NOSUID | MS_NODEV, "size=64k,mode=0755")
    if tmp_bytes:
        # Mounted before the paths are bound: a path under /tmp (a checkout there) is then
        # bound read-only on top of this tmpfs instead of being hidden by it.
        os.makedirs(new_root + "/tmp")
        # Executable: a compiled library is loaded back from here (mmap with PROT_EXEC).
        _mount("tmpfs", new_root + "/tmp", "tmpfs", MS_NOSUID | MS_NODEV,
               f"size={tmp_bytes},mode=1777")  # fmt: skip
    for path in paths:
        if os.path.lexists(path):
            _bind_read_only(path, new_root)
    os.makedirs(new_root + "/dev", exist_ok=True)
    devices = list(DEVICES)
    if gpu:
        devices += sorted(n for n in os.listdir("/dev") if n.startswith("nvidia"))
    for name in devices:
        node = new_root + "/dev/" + name
        if os.path.isdir("/dev/" + name):
            continue  # /dev/nvidia-caps: the nodes a process needs are the files
        open(node, "w").close()  # noqa: SIM115
        _mount("/dev/" + name, node, None, MS_BIND)
    if gpu:
        os.makedirs(new_root + "/proc")
        _mount("proc", new_root + "/proc", "proc", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC)
    if out:
        os.makedirs(new_root + "/out")
        _mount(out, new_root + "/out", None, MS_BIND)
        _mount(None, new_root + "/out", None,
               MS_BIND | MS_REMOUNT | MS_NOSUID | MS_NODEV | MS_NOEXEC)  # fmt: skip
    _mount(None, new_root, "tmpfs", MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)
    os.chroot(new_root)
    os.chdir("/")


def join_cgroups(groups: list[str]) -> None:
    """Move this process (and so every process it starts) into the caller's cgroups."""
    for group in groups:
        with open(os.path.join(group, "cgroup.procs"), "w") as procs:
            procs.write("0")


def drop_privileges(uid: int, limits: dict[str, int]) -> None:
    """Resource limits, then the unprivileged ``uid`` (and gid) with no way back."""
    for name, value in limits.items():
        resource.setrlimit(getattr(resource, name), (value, value))
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    _check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
    _check(libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0), "dumpable")
    # A change of uid clears the parent-death signal `unshare --kill-child` set: set it again,
    # so that killing `unshare` kills this process, and with it (as PID 1) the whole namespace.
    _check(libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "pdeathsig")


def main() -> None:
    config = json.loads(sys.argv[1])
    try:
        if os.getpid() != 1:
            raise OSError("not the first process of a new PID namespace")
        join_cgroups(config["cgroups"])
        build_root(config["paths"], config.get("tmp_bytes", 0), config.get("out"),
                   bool(config.get("gpu")))  # fmt: skip
        drop_privileges(config["uid"], config["limits"])
    except OSError as err:
        sys.stderr.write(f"tunehub-jail: {err}\n")
        sys.stderr.flush()
        os._exit(JAIL_FAILED)
    child = os.fork()
    if child == 0:
        os.execve(config["argv"][0], config["argv"], config["env"])
    os._exit(_reap_until(child))


def _reap_until(child: int) -> int:
    """As PID 1, reap orphans until ``child`` ends; its exit status, or 128 + its signal (as a
    shell reports it: `unshare` itself fails to pass some signals on, SIGXCPU among them).
    When this process exits, the kernel kills whatever else is left in the namespace."""
    while True:
        pid, status = os.waitpid(-1, 0)
        if pid == child:
            if not os.WIFEXITED(status):
                return 128 + os.WTERMSIG(status)
            code = os.WEXITSTATUS(status)
            return 1 if code == JAIL_FAILED else code  # only the jail itself says "unavailable"


if __name__ == "__main__":
    main()
