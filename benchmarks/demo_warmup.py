"""How well the demo's warmed base model judges: the format warm-up of a params file (default
params/demo.yaml, with --set overrides) trained for real, then the run's own stage 1 on the
evaluation pairs (both orders, inference.n_samples sampled judgments each, the run's sampling)
and the greedy judgment. Printed per demo family and overall: the parse rate, the stage-1
accuracy of parsed samples (what 06's summary calls rollout_accuracy), greedy accuracy and the
within-pair confidence AUC (rmlib.analysis.simulation.confidence_auc: how often a right sample is
more confident than a wrong one of the same judged pair), with the warm-up's time.

This is how docs/demo-judge.md's tries were measured, one line per try:

    python benchmarks/demo_warmup.py --set warmup.epochs=3 --output try.json

Each try trains in a fresh temporary run folder (nothing is reused between tries) and takes
about as long as 02's warm-up plus one engine start and 256 short generations.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--params", default="params/demo.yaml")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--run-dir", help="keep the run folder here (default: a temporary one)")
    p.add_argument("--output", help="write the results as JSON here too")
    return p.parse_args(argv)


def family_table(rollouts: Any, greedy: Any, by: str = "subset") -> list[dict[str, Any]]:
    """Per family (the pair's subset) or kind, and overall: parse rate, stage-1 and greedy
    accuracy, confidence AUC."""
    from rmlib.analysis.simulation import confidence_auc

    rows = []
    groups = [(s, g) for s, g in rollouts.groupby(by)] + [("all", rollouts)]
    for name, g in groups:
        parsed = g[g["choice"].notna()]
        gr = greedy if name == "all" else greedy[greedy[by] == name]
        auc, n_cmp = confidence_auc(g)
        rows.append(
            {
                "family": name,
                "samples": len(g),
                "parse_rate": round(float(g["choice"].notna().mean()), 3),
                "stage1_accuracy": round(float(parsed["correct"].mean()), 3)
                if len(parsed)
                else math.nan,
                "greedy_accuracy": round(float(gr["correct"].eq(True).mean()), 3),
                "confidence_auc": round(auc, 3) if n_cmp else math.nan,
                "auc_comparisons": n_cmp,
            }
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    import pandas as pd

    from rmlib.cli import _set_option
    from rmlib.data.pair import both_orders
    from rmlib.judge.judgments import judge_pairs
    from rmlib.judge.prompts import PromptFormat
    from rmlib.run.backends import backend, model_ref
    from rmlib.run.config import load_config
    from rmlib.run.folder import RunFolder
    from rmlib.workbook import steps

    overrides = dict(_set_option(s) for s in args.set)
    cfg = load_config(args.params, overrides)
    root = Path(args.run_dir or tempfile.mkdtemp(prefix="demo_warmup-"))
    run = RunFolder(root)
    run.write_params(cfg)
    steps.load_data(cfg, run)
    t0 = time.perf_counter()
    warm = steps.format_warmup(cfg, run)
    warmup_s = time.perf_counter() - t0
    pairs = run.pairs("pairs_eval")
    if cfg.inference.both_orders:
        pairs = both_orders(pairs)
    t1 = time.perf_counter()
    gen, tokenizer = backend(cfg, run, model_ref(cfg, run, "base"))
    fmt = PromptFormat.of(tokenizer, cfg)
    infer = cfg.inference
    kind = {p.key: p.meta.get("kind") for p in pairs}
    kw = {"confidence_fraction": infer.confidence_fraction}
    rollouts = judge_pairs(pairs, gen, fmt, n=infer.n_samples, params=infer.sampling_params(), **kw)
    greedy = judge_pairs(pairs, gen, fmt, n=1, params=infer.greedy_params(), **kw)
    judge_s = time.perf_counter() - t1
    for df in (rollouts, greedy):  # judge_pairs keeps each pair's subset (its family), not its kind
        df["kind"] = df["key"].map(kind)
    run.write_table("rollouts_eval_base", rollouts)
    run.write_table("greedy_eval_base", greedy)
    table = family_table(rollouts, greedy)
    kinds = family_table(rollouts, greedy, by="kind")
    result = {
        "overrides": overrides,
        "warmup_s": round(warmup_s, 1),
        "judge_s": round(judge_s, 1),
        "warmup": warm.iloc[0].to_dict() if len(warm) else {},
        "families": table,
        "kinds": kinds,
        "run_dir": str(root),
    }
    print(pd.DataFrame(kinds).to_string(index=False))
    print(pd.DataFrame(table).to_string(index=False))
    print(f"warm-up {warmup_s:.0f} s, judging {judge_s:.0f} s; {overrides}")
    if args.output:
        Path(args.output).write_text(json.dumps(result, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
