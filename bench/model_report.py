"""The report of `bench/model.py`: what each model measured (`Row`, each task a `TaskRow`),
the tasks as the server published them, and the tables printed."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from service.client import TunehubClient


@dataclass
class Row:
    """What one model measured: latency (ms) per way, walls (s), max error per way."""

    model: str
    tasks: int
    trials: int
    ms: dict[str, float] = field(default_factory=dict)
    wall: dict[str, float] = field(default_factory=dict)
    error: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    fp32_tasks: list[TaskRow] = field(default_factory=list)
    bf16_tasks: list[TaskRow] = field(default_factory=list)  # the bf16 model's (``--bf16``)


@dataclass
class TaskRow:
    """One task of a tuned model (`task_rows`)."""

    name: str
    weight: int
    trials: int
    latency_us: float
    roofline_us: float | None
    of_roofline: float | None
    space: str  # the design space its schedule came from: which layout and kernel it ended with
    share: float = 0.0


def task_rows(client: TunehubClient, model: dict[str, Any]) -> list[TaskRow]:
    """Each task of a tuned model: calls, trials, its published latency, its share of the
    model's kernel time (calls x latency over the sum) and of its roofline; largest share
    first."""
    rows = []
    for task in model["tasks"]:
        schedule_id = task["job"]["schedule_id"]
        if schedule_id is None:
            continue
        schedule = client.schedule(schedule_id)
        rows.append(TaskRow(task["name"], task["weight"], task["trials"], schedule["latency_us"],
                            schedule["roofline_us"], schedule["of_roofline"],
                            schedule["space"]))  # fmt: skip
    total = sum(r.weight * r.latency_us for r in rows) or 1.0
    for r in rows:
        r.share = r.weight * r.latency_us / total
    return sorted(rows, key=lambda r: r.share, reverse=True)


def ratio(row: Row, way: str) -> str:
    """``way``'s latency over tunehub's (> 1: tunehub is faster)."""
    if way not in row.ms or "tunehub" not in row.ms:
        return "-"
    return f"{row.ms[way] / row.ms['tunehub']:.2f}x"


def print_table(rows: list[Row], threads: int) -> None:
    ways = ["tunehub", "plain TVM", "untuned", "onnxruntime", "torch eager", "torch.compile"]
    bf16 = ["tunehub bf16", "torch bf16", "torch.compile bf16"]
    ways += [w for w in bf16 if any(w in r.ms for r in rows)]
    head = (f"{'model':<11} {'tasks':>5} {'trials':>6} "
            + " ".join(f"{w + ' ms':>16}" for w in ways)
            + f" {'ort/tunehub':>11} {'eager/tunehub':>13} {'compile/tunehub':>15} "
            f"{'tunehub tune s':>14} {'plain tune s':>12} {'fetch build s':>13} "
            f"{'untuned build s':>15}")  # fmt: skip
    print("\n" + head)
    for r in rows:
        cells = " ".join(f"{r.ms[w]:>16.3f}" if w in r.ms else f"{'-':>16}" for w in ways)
        print(f"{r.model:<11} {r.tasks:>5} {r.trials:>6} {cells} {ratio(r, 'onnxruntime'):>11} "
              f"{ratio(r, 'torch eager'):>13} "
              f"{ratio(r, 'torch.compile'):>15} {r.wall['tunehub tune']:>14.0f} "
              f"{r.wall.get('plain tune', float('nan')):>12.0f} {r.wall['fetch build']:>13.1f} "
              f"{r.wall['untuned build']:>15.1f}")  # fmt: skip
    tables = [
        (r.model + label, tasks)
        for r in rows
        for label, tasks in (("", r.fp32_tasks), (" bf16", r.bf16_tasks))
        if tasks
    ]
    for name, tasks in tables:
        print(f"\n{name}: tasks by share of the kernel time (calls x published latency)")
        print(f"{'task':<40} {'calls':>5} {'trials':>6} {'latency us':>11} {'share':>6} "
              f"{'roofline us':>11} {'of roofline':>11} {'space':>12}")  # fmt: skip
        for t in tasks:
            roof = f"{t.roofline_us:>11.1f}" if t.roofline_us is not None else f"{'-':>11}"
            of = f"{100 * t.of_roofline:>10.0f}%" if t.of_roofline is not None else f"{'-':>11}"
            print(f"{t.name[:40]:<40} {t.weight:>5} {t.trials:>6} {t.latency_us:>11.1f} "
                  f"{100 * t.share:>5.1f}% {roof} {of} {t.space:>12}")  # fmt: skip
    print("roofline: '-' where the target's figures were measured under load (not trusted)")
    for r in rows:
        if "tunehub bf16" in r.ms:
            print(f"{r.model}: tunehub bf16 {r.ms['tunehub bf16']:.3f} ms (tuned in "
                  f"{r.wall.get('tunehub bf16 tune', float('nan')):.0f} s): "
                  + ", ".join(f"{w} {r.ms[w] / r.ms['tunehub bf16']:.2f}x" for w in ways
                              if w in r.ms and w != "tunehub bf16"))  # fmt: skip
    for r in rows:
        errors = ", ".join(f"{w} {e:.1e}" for w, e in r.error.items())
        print(f"{r.model}: max |out - untuned TVM| / max |untuned TVM|: {errors}")
        for note in r.notes:
            print(f"{r.model}: {note}")
    print(f"each ms: median of rounds, each the median of samples of >= 0.1 s, every way on "
          f"{threads} threads; x/tunehub > 1: tunehub is faster; 1-min load average "
          f"{os.getloadavg()[0]:.2f} at the end")  # fmt: skip
