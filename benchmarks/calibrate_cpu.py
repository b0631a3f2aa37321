"""Check the dry run's time model on this CPU: measure, predict, compare (issue #20).

    .venv/bin/python benchmarks/calibrate_cpu.py --run outputs/demo

1. Measures what the time model needs of this device (unless --constants FILE is given): the
   matmul FLOPS it achieves at the profile's precision on the backbone's MLP shape, the share
   of them a LoRA training step achieves (train_mfu), the memory bandwidth a read of a large
   tensor achieves, the memory, and (--engine-start, default on) the run's vLLM CPU engine's
   start on the backbone; a notebook's overhead is the run's 01_data time
   (kernel start, imports, the data) when the run has one. Writes them to --output
   (default cpu_constants.json): a CPU constants file.
2. Predicts: `rmlib run PARAMS --dry-run --gpu-constants FILE` (the same plan as for a GPU,
   with this CPU as the card; the expected figures, at the backbone's own prompt lengths
   measured on the run's pairs with its tokenizer when --measure-lengths).
3. Compares with the finished run's per-notebook wall times (its state.json; or
   --measured 02_rollouts=654 ...) and prints the table: within +-30 % (--tolerance) or not.

Run it on a quiet machine: the measurements and the run's times must see the same CPU.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rmlib.workbook.plan.calibrate import (  # noqa: E402
    TOLERANCE,
    compare,
    format_comparison,
    measured_seconds,
    write_cpu_constants,
)

BANDWIDTH_BYTES = 512 * 1024**2  # large against any cache, small against the machine's memory
MATMUL_TOKENS = 512  # rows of the timed matmul: a decode batch / a training micro-batch's order


def _best_of(fn: Any, reps: int) -> float:
    fn()  # warm-up: thread pools, allocator
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def measure_tflops(hidden: int, intermediate: int, dtype: Any, reps: int = 5) -> float:
    """Achieved TFLOPS of a [tokens, hidden] x [hidden, intermediate] matmul (an MLP's)."""
    import torch

    a = torch.randn(MATMUL_TOKENS, hidden, dtype=dtype)
    b = torch.randn(hidden, intermediate, dtype=dtype)
    seconds = _best_of(lambda: a @ b, reps)
    return 2 * MATMUL_TOKENS * hidden * intermediate / seconds / 1e12


def measure_bandwidth(reps: int = 5) -> float:
    """Achieved GB/s of reading a large fp32 tensor once (a decode step reads the weights)."""
    import torch

    x = torch.ones(BANDWIDTH_BYTES // 4, dtype=torch.float32)
    seconds = _best_of(lambda: x.sum(), reps)
    return BANDWIDTH_BYTES / seconds / 1e9


def measure_engine_start(cfg: Any, precision: str) -> float:
    """Seconds to start the run's own vLLM CPU engine on its backbone (the settings its notebooks
    start: eager on CPU unless the profile says otherwise; a compiled engine took 147 s here,
    the eager one of the run under a minute)."""
    from rmlib.generation.models import resolve_model
    from rmlib.generation.vllm import engine, shutdown
    from rmlib.run.backends import vllm_settings

    settings = vllm_settings(cfg, resolve_model(cfg.model.backbone), precision)
    t0 = time.perf_counter()
    try:
        engine(settings)
        return time.perf_counter() - t0
    finally:
        shutdown()  # its worker processes too: none left behind


def measure_train_mfu(cfg: Any, precision: str, tflops: float, reps: int = 2) -> float:
    """The share of the matmul FLOPS a LoRA training step of the backbone achieves on this CPU:
    forward and backward (4 x params FLOPs a token: LoRA trains no base weight) over the
    warm-up's batch at 512 tokens, with the warm-up's adapter. On a GPU TRAIN_MFU is assumed;
    on this CPU the step's attention, norms, autograd and small LoRA matmuls run far below the
    MLP matmul's rate (the demo's warm-up took ~3.7x the matmul-bound time)."""
    import torch
    from peft import LoraConfig, get_peft_model

    from rmlib.generation.models import load_backbone

    w = cfg.warmup
    model, _ = load_backbone(cfg.model.backbone, precision=precision, device_map="cpu")
    params = sum(p.numel() for p in model.parameters())
    lora = LoraConfig(r=w.lora_r, lora_alpha=w.lora_alpha, target_modules=w.lora_target_modules)
    model = get_peft_model(model, lora)
    model.train()
    ids = torch.randint(0, model.config.vocab_size, (w.batch_size, 512))

    def step() -> None:
        model(input_ids=ids, labels=ids).loss.backward()
        model.zero_grad(set_to_none=True)

    seconds = _best_of(step, reps)
    return 4 * params * ids.numel() / seconds / (tflops * 1e12)


def memory_gib() -> float:
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1024**3


def measure_constants(cfg: Any, args: argparse.Namespace, measured: dict[str, float]) -> Path:
    """Measure this CPU into a constants file (step 1); returns its path."""
    import torch

    from rmlib.generation.models import resolve_precision
    from rmlib.workbook.plan import model_facts

    precision, why = resolve_precision(cfg.model.precision)
    dtype = torch.bfloat16 if precision == "bf16" else torch.float32
    facts = model_facts(cfg.model.backbone)
    if facts is None:
        raise SystemExit(f"{cfg.model.backbone}: dimensions unknown, cannot time its matmuls")
    raw: dict[str, Any] = {"precision_why": why, "threads": torch.get_num_threads()}
    raw["tflops"] = measure_tflops(facts.hidden, facts.intermediate, dtype)
    raw["bandwidth_gb_s"] = measure_bandwidth()
    constants: dict[str, float] = {}
    if "01_data" in measured:
        constants["notebook_overhead_s"] = measured["01_data"]
    constants["train_mfu"] = measure_train_mfu(cfg, precision, raw["tflops"])
    if args.engine_start:
        constants["vllm_engine_start_s"] = measure_engine_start(cfg, precision)
    out = Path(args.output)
    write_cpu_constants(
        out,
        device=f"cpu: {_cpu_name()} ({raw['threads']} threads)",
        precision=precision,
        bandwidth_gb_s=raw["bandwidth_gb_s"],
        tflops=raw["tflops"],
        memory_gib=memory_gib(),
        constants=constants,
        measured=raw,
    )
    return out


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.partition(":")[2].strip()
    except OSError:
        pass
    return "unknown CPU"


def _measured(args: argparse.Namespace) -> dict[str, float]:
    measured = measured_seconds(args.run) if args.run else {}
    for item in args.measured:
        nb, _, seconds = item.partition("=")
        measured[nb] = float(seconds)
    return measured


def _lengths_file(cfg: Any, run: str | None, out: Path) -> Path | None:
    """The run's evaluation and training pairs measured with the backbone's tokenizer."""
    if not run:
        return None
    from rmlib.run.folder import RunFolder
    from rmlib.workbook.plan.lengths import load_tokenizer, measure, write_lengths

    folder = RunFolder(run)
    tokenizer = load_tokenizer(cfg.model.backbone)
    by_source: dict[str, list[Any]] = {}
    for table in ("pairs_train", "pairs_eval"):
        try:
            pairs = folder.pairs(table)
        except (OSError, KeyError, ValueError):
            continue
        for pair in pairs:
            by_source.setdefault(pair.source, []).append(pair)
    for source, pairs in by_source.items():
        write_lengths(out, source, measure(pairs, tokenizer, cfg.model.backbone))
    return out if out.exists() else None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--params", default="params/demo.yaml")
    ap.add_argument("--run", help="a finished run folder of those params (its state.json)")
    ap.add_argument(
        "--measured",
        action="append",
        default=[],
        metavar="NOTEBOOK=SECONDS",
        help="a measured notebook time (adds to or replaces the run's)",
    )
    ap.add_argument("--constants", help="a CPU constants file already measured (skip step 1)")
    ap.add_argument("--output", default="cpu_constants.json", help="where step 1 writes")
    ap.add_argument(
        "--engine-start",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="time a vLLM engine start on the backbone (default on)",
    )
    ap.add_argument(
        "--measure-lengths",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="measure the run's pairs with the backbone's tokenizer for the expected prompts",
    )
    ap.add_argument("--tolerance", type=float, default=TOLERANCE)
    ap.add_argument("--json", action="store_true", help="print the comparison as JSON")
    args = ap.parse_args()

    from rmlib.run.config import load_config
    from rmlib.workbook.plan import plan

    cfg = load_config(args.params)
    measured = _measured(args)
    if not measured:
        raise SystemExit("nothing to compare with: pass --run FOLDER or --measured NB=SECONDS")
    constants = Path(args.constants) if args.constants else measure_constants(cfg, args, measured)
    lengths = None
    if args.measure_lengths:
        lengths = _lengths_file(cfg, args.run, Path(args.output).with_suffix(".lengths.json"))
    p = plan(cfg, gpu_constants=constants, lengths=lengths)
    rows = compare(p, measured, args.tolerance)
    if args.json:
        print(json.dumps({"constants": str(constants), "rows": rows}, indent=2))
    else:
        print(f"constants: {constants}; lengths: {lengths or 'built-in'}")
        print(format_comparison(rows, args.tolerance))
    return 0 if rows and all(r["within"] for r in rows) else 1


if __name__ == "__main__":
    from rmlib.cli import run_script

    raise SystemExit(run_script(main))
