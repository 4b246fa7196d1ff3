"""OS-level isolation for untrusted input: a jail of namespaces, an unprivileged uid of its
own and resource limits around one child process per request (`run_isolated`)."""

from tuning.sandbox.runner import (
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
    "unavailable_reason",
]
