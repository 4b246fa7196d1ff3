"""How pages print numbers and times (Jinja filters): latencies in the unit that suits them,
GFLOPS and ratios with sensible digits, ages in seconds to days."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from schedules_db.figures import is_quiet


def latency(us: float | None) -> str:
    """``12.3 us``, ``4.56 ms``, ``1.23 s``; an en dash for None."""
    if us is None:
        return "–"
    if us < 1000:
        return f"{us:.3g} us" if us < 100 else f"{us:.0f} us"
    if us < 1e6:
        return f"{us / 1e3:.3g} ms"
    return f"{us / 1e6:.3g} s"


def number(value: float | None, digits: int = 3) -> str:
    """A number with ``digits`` significant digits (thousands unabridged); en dash for None."""
    if value is None:
        return "–"
    if abs(value) >= 10**digits:
        return f"{value:,.0f}"
    return f"{value:.{digits}g}"


def ratio(value: float | None) -> str:
    """``12.3x``; en dash for None."""
    return "–" if value is None else f"{number(value)}x"


def age(when: str | datetime | None, now: datetime | None = None) -> str:
    """How long ago an ISO time (or datetime) was: ``42 s``, ``5 min``, ``3 h``, ``2 d``."""
    if when is None:
        return "–"
    moment = datetime.fromisoformat(when) if isinstance(when, str) else when
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    seconds = max(0.0, ((now or datetime.now(timezone.utc)) - moment).total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f} {unit}"
    return f"{seconds:.0f} s"


def share_of_peak(
    gflops: float | None, peak: float | None, interference: float | None
) -> float | None:
    """A kernel's GFLOPS as a percentage of its target's peak, at most 100 (a kernel above it
    did fewer multiplies than it is counted for, or the peak was measured low); None without
    either, or when the peak was measured under ``interference`` that is not quiet
    (`schedules_db.figures.is_quiet`)."""
    if not gflops or not peak or not is_quiet(interference):
        return None
    return min(100.0, 100.0 * (gflops / peak))  # the ratio first: 1.0 exactly at the peak


def peak_for(target: Any, workload_params: dict[str, Any] | None) -> dict[str, Any]:
    """The peak a kernel of a workload with these params is measured against on ``target``
    (a target as the API shows it): its bf16 unit's for bfloat16 operands, else the fp32 FMA
    peak; ``gflops``, ``interference`` and ``what`` (its name in words)."""

    def field(obj: Any, name: str) -> Any:
        return obj.get(name) if isinstance(obj, dict) else getattr(obj, name, None)

    if (workload_params or {}).get("dtype") == "bfloat16":
        bf16 = field(target, "bf16_peak") or {}
        unit = field(bf16, "unit")
        what = f"bf16, {unit}" if unit else "bf16: no bf16 peak measured"
        return {"gflops": field(bf16, "gflops"), "interference": field(bf16, "interference"),
                "what": what}  # fmt: skip
    return {"gflops": field(target, "peak_gflops"),
            "interference": field(target, "peak_interference"), "what": "fp32 FMA"}  # fmt: skip


def params(values: dict[str, Any]) -> str:
    """An operator's params as ``M=64 N=64 dtype=float32``."""
    return " ".join(f"{k}={v}" for k, v in values.items())


FILTERS = {"latency": latency, "number": number, "ratio": ratio, "age": age, "params": params,
           "share_of_peak": share_of_peak, "peak_for": peak_for}  # fmt: skip
