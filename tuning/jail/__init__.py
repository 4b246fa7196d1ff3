"""OS-level isolation, the machinery only: a jail of namespaces, an unprivileged uid of its
own and resource limits around one child process per request (`run_isolated`), built by
`spawn` (the command and its limits), `enter` (the namespaces' first process) and `cgroups`.
What runs inside is the caller's: `tuning.untrusted` (user input) and `tuning.measure`
(kernels)."""

from tuning.jail.isolated import (
    MODEL_COMPILE_LIMITS,
    MODEL_IMPORT_LIMITS,
    Limits,
    SandboxBusy,
    SandboxError,
    SandboxFailed,
    SandboxUnavailable,
    holding_slot,
    run_isolated,
    set_max_concurrent,
    slots_busy,
    unavailable_reason,
)

__all__ = [
    "MODEL_COMPILE_LIMITS",
    "MODEL_IMPORT_LIMITS",
    "Limits",
    "SandboxBusy",
    "SandboxError",
    "SandboxFailed",
    "SandboxUnavailable",
    "holding_slot",
    "run_isolated",
    "set_max_concurrent",
    "slots_busy",
    "unavailable_reason",
]
