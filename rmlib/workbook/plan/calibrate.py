"""Check the dry run's time model where it can be checked: on this CPU.

`benchmarks/calibrate_cpu.py` measures what the time model needs of a device (achieved memory
bandwidth and matmul FLOPS, a vLLM engine's start, a notebook's overhead) into a CPU constants
file (`write_cpu_constants`); `rmlib run PARAMS --dry-run --gpu-constants FILE` then plans for
that CPU with the same model as for a GPU (decode bandwidth- or compute-bound at each engine's
batch and context, prefill and training FLOPS-bound), and `compare` sets its per-notebook
predictions beside a finished run's measured times (state.json records each notebook's
`seconds`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rmlib.workbook.plan.constants import CPU_KIND

TOLERANCE = 0.3  # the bar: predictions within +-30 % of the measured times


def write_cpu_constants(
    path: str | Path,
    *,
    device: str,
    precision: str,
    bandwidth_gb_s: float,
    tflops: float,
    memory_gib: float,
    constants: dict[str, float],
    measured: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Write a CPU constants file: the achieved bandwidth and FLOPS at `precision`, and the
    constants measured outright (named as in rmlib.workbook.plan.constants: vllm_engine_start_s,
    notebook_overhead_s, ...); `measured` keeps the raw measurements beside them."""
    data = {
        "kind": CPU_KIND,
        "device": device,
        "precision": precision,
        "bandwidth_gb_s": round(bandwidth_gb_s, 2),
        "tflops": round(tflops, 5),
        "memory_gib": round(memory_gib, 1),
        "constants": {k: round(v, 2) for k, v in constants.items()},
        "measured": measured or {},
    }
    Path(path).write_text(json.dumps(data, indent=2) + "\n")
    return data


def measured_seconds(run_dir: str | Path) -> dict[str, float]:
    """Each completed notebook's wall seconds from a run folder's state.json."""
    path = Path(run_dir) / "state.json"
    if not path.is_file():
        raise ValueError(f"{path}: no state.json (not a run folder, or no notebook finished)")
    state = json.loads(path.read_text())
    return {
        nb: float(entry["seconds"])
        for nb, entry in state.items()
        if isinstance(entry, dict) and entry.get("status") == "completed" and "seconds" in entry
    }


def compare(
    plan: dict[str, Any], measured: dict[str, float], tolerance: float = TOLERANCE
) -> list[dict[str, Any]]:
    """Per notebook the plan estimates (expected and upper bound, seconds) beside the measured
    seconds: their ratio and whether the expected figure is within `tolerance` of it. Notebooks
    the plan does not estimate (no GPU work) or the run did not finish are left out."""
    rows = []
    for r in plan["per_notebook"]:
        nb = r["notebook"]
        if r.get("hours_expected") is None or nb not in measured:
            continue
        predicted = r["hours_expected"] * 3600
        ratio = predicted / measured[nb] if measured[nb] > 0 else float("inf")
        rows.append(
            {
                "notebook": nb,
                "predicted_s": round(predicted, 1),
                "upper_bound_s": round(r["hours"] * 3600, 1),
                "measured_s": round(measured[nb], 1),
                "ratio": round(ratio, 3),
                "within": abs(ratio - 1) <= tolerance,
                "parts_s": r.get("seconds_expected") or {},
            }
        )
    return rows


def format_comparison(rows: list[dict[str, Any]], tolerance: float = TOLERANCE) -> str:
    """The comparison as a table, with a last line saying whether every notebook is within."""
    head = f"{'notebook':<14} {'predicted s':>11} {'upper s':>9} {'measured s':>10} {'ratio':>6}"
    lines = [head, "-" * len(head)]
    for r in rows:
        mark = "ok" if r["within"] else f"OUTSIDE +-{tolerance:.0%}"
        lines.append(
            f"{r['notebook']:<14} {r['predicted_s']:>11,.0f} {r['upper_bound_s']:>9,.0f} "
            f"{r['measured_s']:>10,.0f} {r['ratio']:>6.2f}  {mark}"
        )
        parts = ", ".join(f"{k} {v:,.0f}" for k, v in r["parts_s"].items())
        lines.append(f"{'':<14} ({parts})")
    verdict = all(r["within"] for r in rows) and bool(rows)
    lines.append(
        f"{'all' if verdict else 'NOT all'} of {len(rows)} notebooks within +-{tolerance:.0%} "
        "(predicted: the dry run's expected figure)"
    )
    return "\n".join(lines)
