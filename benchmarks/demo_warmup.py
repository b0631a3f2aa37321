"""How well the demo's warmed base model judges: the format warm-up of a params file (default
params/demo.yaml, with --set overrides) trained for real, then the run's own stage 1 on the
evaluation pairs (both orders, inference.n_samples sampled judgments each, the run's sampling)
and the greedy judgment. Printed per demo family and overall: the parse rate, the stage-1
accuracy of parsed samples (what 06's summary calls rollout_accuracy), greedy accuracy and the
within-pair confidence AUC (rmlib.analysis.simulation.confidence_auc: how often a right sample is
more confident than a wrong one of the same judged pair), with the warm-up's time.

This is how docs/demo-judge.md's tries were measured, one line per try:

    python benchmarks/demo_warmup.py --set warmup.epochs=3 --output try.json

With --stage2 the base model runs the run's whole two-stage inference instead (04's
`run_reflectrm`: stage 1, greedy, stage 2 and every vote) and the summary adds what the base's
reflection can do before any Refl. training: its reflection accuracy (the right critique chosen
where exactly one of the two is right) and ReflectRM minus majority vote, and 06's model checked
on it (`map_check`: each method's predicted accuracy against the measured one's interval).
Compare the warm-up's Refl. targets so, one seed at a time:

    python benchmarks/demo_warmup.py --stage2 --set warmup.refl_targets=format --set run.seed=1
    python benchmarks/demo_warmup.py --stage2 --set warmup.refl_targets=correct --set run.seed=1

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
    p.add_argument(
        "--stage2",
        action="store_true",
        help="run the whole two-stage inference: reflection accuracy, ReflectRM - majority",
    )
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


def stage2_summary(tables: dict[str, Any], failure_credit: float) -> dict[str, Any]:
    """What the base's reflection does, from `run_reflectrm`'s tables: the reflection accuracy
    of ReflectRM's informative calls (exactly one critique right; an unparsed call counts as not
    preferring it, as 06 counts it), and accuracy per method (parse failures at the failure
    credit, both orders pooled) with ReflectRM minus majority vote."""
    from rmlib.reflect.quality import analysis_quality
    from rmlib.scoring import credited

    q = analysis_quality(tables["rollouts"], tables["reflections"], tables["predictions"])
    preds = tables["predictions"]
    acc = {
        str(m): round(float(credited(g, failure_credit).mean()), 4)
        for m, g in preds.groupby("method", sort=False)
    }
    gain = acc["reflectrm"] - acc["majority"] if {"reflectrm", "majority"} <= set(acc) else None
    return {
        "stage1_accuracy": q["rollout_accuracy"],
        "reflection_accuracy": q["reflection_accuracy"],
        "n_informative_reflections": q["n_informative_reflections"],
        "accuracy": acc,
        "reflectrm_minus_majority": None if gain is None else round(gain, 4),
    }


def map_check(cfg: Any, run: Any, tables: dict[str, Any]) -> list[dict[str, Any]]:
    """06's model on this base: the tables written as 04 writes a model's (as `base`), then
    `reflection_pays`'s `run` rows: per method, the accuracy predicted from the measured
    parameters (and with both correlations at 0) beside the measured accuracy, its bootstrap
    interval and whether the prediction falls inside it."""
    from rmlib.analysis.simulation import reflection_pays

    for name, table in tables.items():
        run.write_table(f"{name}_base", table)
    return reflection_pays(cfg, run, "base")["run"].to_dict("records")


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
    stage2 = None
    if args.stage2:
        from rmlib.reflect import run_reflectrm

        tables = run_reflectrm(run.pairs("pairs_eval"), gen, fmt, infer).tables()
        rollouts, greedy = tables["rollouts"], tables["greedy"]
        stage2 = stage2_summary(tables, cfg.eval.failure_credit)
        stage2["map_check"] = map_check(cfg, run, tables)
    else:
        sampling = infer.sampling_params()
        rollouts = judge_pairs(pairs, gen, fmt, n=infer.n_samples, params=sampling, **kw)
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
    if stage2 is not None:
        result["stage2"] = stage2
        print(json.dumps(stage2, indent=1, default=str))
    print(pd.DataFrame(kinds).to_string(index=False))
    print(pd.DataFrame(table).to_string(index=False))
    print(f"warm-up {warmup_s:.0f} s, judging {judge_s:.0f} s; {overrides}")
    if args.output:
        Path(args.output).write_text(json.dumps(result, indent=2, default=str))
    return 0


if __name__ == "__main__":
    from rmlib.cli import run_script

    sys.exit(run_script(main))
