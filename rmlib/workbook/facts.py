"""What a run actually used, as one Markdown line the notebooks display under their title.

The few facts that vary by profile and machine — the backbone, the precision of each stage, who
generates, the adapter method (LoRA, or QLoRA on a 4-bit base) — are never written into a
notebook's prose: a chapter titled for one profile would be false for the others (notebook 03
once read "GRPO with QLoRA … 4-bit NF4 backbone" over a bf16 run). The notebooks show
`what_ran(cfg, run)` instead, rendered from the run's manifest.json (written by `rmlib run`,
`rmlib.workbook.execute.manifest`), and tests/test_notebook_prose.py keeps those terms out of their
markdown.

A notebook opened by hand on a folder without a manifest gets the same facts computed now from
its params (the precision choices depend on this machine, as the runner's would).
"""

from __future__ import annotations

import json
from typing import Any

from rmlib.generation.registry import BACKENDS
from rmlib.run.config import RunConfig
from rmlib.run.folder import RunFolder

MANIFEST = "manifest.json"


def run_facts(cfg: RunConfig, run: RunFolder) -> dict[str, Any]:
    """The manifest's sections this line reads (`params`, `precision`, `hardware`): from the run
    folder's manifest.json, else computed now from `cfg` (a notebook opened by hand)."""
    path = run.path / MANIFEST
    if path.exists():
        manifest = json.loads(path.read_text())
        manifest["source"] = MANIFEST
        return manifest
    from rmlib.workbook.execute import manifest

    return {**manifest(cfg), "source": "this run's params; no manifest.json yet"}


def what_ran(cfg: RunConfig, run: RunFolder) -> str:
    """One Markdown line: backbone and device, generation (who, in which precision), GRPO's
    adapter method and base, and the format warm-up's, from `run_facts`."""
    facts = run_facts(cfg, run)
    params, prec = facts["params"], facts["precision"]
    device = _device(facts.get("hardware", {}), params)
    parts = [f"backbone `{params['model']['backbone']}` on {device}"]
    parts.append(_generation(params, prec))
    parts.append("GRPO: " + _adapter(prec["train_precision"]["used"]) + _sampler(prec))
    warm = prec.get("warmup_precision")
    if params.get("warmup", {}).get("enabled") and warm:
        parts.append("format warm-up: " + _adapter(warm["used"]))
    return f"**What this run used** (from {facts['source']}): " + "; ".join(parts) + "."


def _device(hardware: dict[str, Any], params: dict[str, Any]) -> str:
    gpus = hardware.get("gpus") or []
    if gpus:
        used = min(params.get("run", {}).get("gpus", 1), len(gpus))  # run.gpus of the node's
        return f"{used} of {len(gpus)} × {gpus[0]}" if used < len(gpus) else f"{used} × {gpus[0]}"
    return f"the CPU ({hardware.get('cpu_count', '?')} cores)"


def _generation(params: dict[str, Any], prec: dict[str, Any]) -> str:
    backend = params["generation"]["backend"]
    entry = BACKENDS.get(backend)  # who generates (an old manifest may name one no longer here)
    who = entry.who if entry else backend
    if entry is not None and not entry.local_weights:  # the servers' precision is theirs
        return f"generation by {who}"
    used = prec["precision"]
    return f"generation by {who} in {used['used']} ({used['why']})"


def _adapter(precision: str) -> str:
    if precision == "nf4":
        return "QLoRA (LoRA adapters on a 4-bit NF4 base)"
    return f"LoRA adapters on a {precision} base"


def _sampler(prec: dict[str, Any]) -> str:
    bases = prec.get("adapters") or {}
    if not bases:
        return ""
    return f", groups sampled by {bases['sampled_by']} in {bases['sampled_on']}"
