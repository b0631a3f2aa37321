"""The workbook's steps: what each notebook calls, reading and writing tables in the run folder.

Each step is idempotent and resumable: it reads its inputs from the run folder, goes through the
generation store for every generation, and writes its outputs as parquet tables. Any step can be
re-run alone once its inputs exist; any plot can be redrawn from the tables.

Which models a run has is `rmlib.run.models`; which weights and which backend serve each is
`rmlib.run.backends`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import pandas as pd

from rmlib.data.pair import Pair
from rmlib.data.settings import load_split
from rmlib.judge.prompts import PromptFormat
from rmlib.run.backends import backend, base_path, model_ref
from rmlib.run.config import RunConfig
from rmlib.run.folder import RunFolder
from rmlib.run.models import MIX_VARIANT, stage1_model, trained_models
from rmlib.writes import unlink_links, write_text


def load_data(cfg: RunConfig, run: RunFolder) -> pd.DataFrame:
    """Load the training source and every evaluation set; write pairs_train / pairs_eval.

    Returns one summary row per set (counts, subsets, label balance, skipped and dropped rows).
    """
    seed = cfg.data.subsample_seed if cfg.data.subsample_seed is not None else cfg.run.seed
    rows, eval_pairs = [], []
    for role, spec in [("train", cfg.data.train), *[("eval", s) for s in cfg.data.eval]]:
        result = load_split(spec, seed)
        if cfg.data.pad_to_budget:
            chars = PAD_CHARS_PER_TOKEN * cfg.prompts.longest_prompt_tokens()
            result.pairs = [padded(p, chars) for p in result.pairs]
        if spec.path:
            run.record_data_file(spec.path)
        stats = result.stats()
        # dict-valued stats are stored as JSON text: parquet cannot hold empty structs
        rows.append(
            {
                "role": role,
                **{k: json.dumps(v) if isinstance(v, dict) else v for k, v in stats.items()},
            }
        )
        if role == "train":
            run.write_table("pairs_train", pairs_frame(result.pairs))
        else:
            eval_pairs.extend(result.pairs)
    run.write_table("pairs_eval", pairs_frame(eval_pairs))
    summary = pd.DataFrame(rows)
    run.write_table("data_summary", summary)
    return summary


# data.pad_to_budget: characters a padded response gets per token of the longest budget. Prose
# runs at ~4 characters a token with the Qwen3 tokenizer; 8 leaves a margin, so a padded pair is
# over every budget and its prompts are cut to it (rmlib.judge.prompts), whatever the tokenizer.
PAD_CHARS_PER_TOKEN = 8


def padded(pair: Pair, chars: int) -> Pair:
    """The pair with each response repeated (blank-line separated) to at least `chars`
    characters: the same content, only longer."""

    def grow(text: str) -> str:
        unit = text if text.strip() else "(an empty response, padded)"  # HH-RLHF has empty ones
        return "\n\n".join([unit] * -(-chars // (len(unit) + 2)))  # ceil

    return replace(pair, response1=grow(pair.response1), response2=grow(pair.response2))


def pairs_frame(pairs: Sequence[Pair]) -> pd.DataFrame:
    return pd.DataFrame([p.to_row() for p in pairs])


def response_lengths(pairs: Sequence[Pair], tokenizer: Any | None = None) -> pd.DataFrame:
    """Per pair: lengths of the two responses (characters, and tokens when a tokenizer is given),
    and the better response's slot, for the data and bias notebooks."""
    rows = []
    for p in pairs:
        row = {
            "key": p.key,
            "source": p.source,
            "subset": p.subset,
            "label": p.label,
            "len1": len(p.response1),
            "len2": len(p.response2),
        }
        if tokenizer is not None:
            row["tok1"] = len(tokenizer(p.response1, add_special_tokens=False)["input_ids"])
            row["tok2"] = len(tokenizer(p.response2, add_special_tokens=False)["input_ids"])
        rows.append(row)
    df = pd.DataFrame(rows)
    df["len_chosen"] = df.len1.where(df.label == 1, df.len2)
    df["len_rejected"] = df.len2.where(df.label == 1, df.len1)
    return df


def format_warmup(cfg: RunConfig, run: RunFolder) -> pd.DataFrame:
    """The supervised format warm-up (profiles with warmup.enabled), merged into models/base.

    Skipped when models/base already holds a complete checkpoint made with the same backbone,
    seed and warm-up settings (anything else trains it again). The merge is written to a
    temporary folder and renamed, so an interrupted merge is never mistaken for a finished one.
    """
    import shutil
    from dataclasses import asdict

    from rmlib.generation.models import load_tokenizer
    from rmlib.training.sft import run_warmup, warmup_pairs

    summary_file = run.path / "models" / "warmup.json"
    if not cfg.warmup.enabled:
        print("this profile has no format warm-up: base = the backbone as it is")
        return pd.DataFrame()
    merged = run.path / "models" / "base"
    made_by = {
        "backbone": cfg.model.backbone,
        "seed": cfg.run.seed,
        "settings": json.loads(json.dumps(asdict(cfg.warmup))),
        # the examples' prompts: their budgets, critiques' <Result> lines, thinking switch
        "prompts": asdict(cfg.prompts),
        "enable_thinking": cfg.model.enable_thinking,
    }
    if (merged / "config.json").exists() and summary_file.exists():
        done = json.loads(summary_file.read_text())
        if {k: done.get(k) for k in made_by} == made_by:
            print(f"warm-up already done: {merged}")
            return pd.DataFrame([done])
        print("warm-up settings changed since models/base was made: training it again")
    pairs = warmup_pairs(cfg.warmup, seed=cfg.run.seed)
    tmp = merged.with_name("base.partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tokenizer = load_tokenizer(cfg.model.backbone, trust_remote_code=cfg.model.trust_remote_code)
    unlink_links(run.adapter_dir("warmup"))  # SFTTrainer writes by name: never through a link
    result = run_warmup(
        pairs,
        cfg.warmup,
        run.adapter_dir("warmup"),
        backbone=cfg.model.backbone,
        fmt=PromptFormat.of(tokenizer, cfg),
        seed=cfg.run.seed,
        merged_dir=tmp,
        trust_remote_code=cfg.model.trust_remote_code,
    )
    shutil.rmtree(merged, ignore_errors=True)
    tmp.rename(merged)
    summary = {
        **made_by,
        "examples": result.n_examples,
        "cut_at_max_length": result.n_cut,  # > 0: raise warmup.max_length (targets cut/dropped)
        "steps": result.steps,
        "train_loss": result.train_loss,
        "merged": str(merged),
    }
    write_text(summary_file, json.dumps(summary, indent=2))
    return pd.DataFrame([summary])


def training_rollouts(cfg: RunConfig, run: RunFolder) -> pd.DataFrame:
    """N judgments of every training pair by the base model (stored; resumable): rollouts_train."""
    from rmlib.generation.base import SamplingParams
    from rmlib.judge.judgments import judge_pairs

    pairs = run.pairs("pairs_train")
    gen, tokenizer = backend(cfg, run, model_ref(cfg, run, "base"))
    params = SamplingParams(
        max_new_tokens=cfg.rollouts.max_new_tokens,
        do_sample=True,
        temperature=cfg.rollouts.temperature,
        seed=cfg.run.seed,
    )
    df = judge_pairs(
        pairs,
        gen,
        PromptFormat.of(tokenizer, cfg),
        n=cfg.rollouts.n_samples,
        params=params,
        confidence_fraction=cfg.inference.confidence_fraction,
    )
    run.write_table("rollouts_train", df)
    return df


def rollout_summary(rollouts: pd.DataFrame) -> pd.DataFrame:
    """Share parsed, accuracy among parsed, and failures by kind, over all rollouts."""
    parsed = rollouts["failure"].isna()
    row = {
        "rollouts": len(rollouts),
        "pairs": rollouts["key"].nunique(),
        "parsed": int(parsed.sum()),
        "parse_rate": float(parsed.mean()) if len(rollouts) else None,
        "accuracy_of_parsed": float(rollouts.loc[parsed, "correct"].mean())
        if parsed.any()
        else None,
        "truncated_prompts": int(rollouts.get("truncated_prompt", pd.Series(dtype=bool)).sum()),
    }
    row.update({f"failure:{k}": int(v) for k, v in rollouts["failure"].value_counts().items()})
    return pd.DataFrame([row])


def mix_dir(run: RunFolder, model: str) -> Path:
    return run.path / "mixes" / model


def build_mixes(cfg: RunConfig, run: RunFolder) -> pd.DataFrame:
    """The training set of every trained model from the base model's rollouts, saved under
    mixes/<model>/ (a TRL-ready dataset with provenance); returns the paper-style counts table."""
    from dataclasses import replace

    from rmlib.generation.models import load_tokenizer
    from rmlib.training.mix import build_mix

    rollouts = run.read_table("rollouts_train")
    pairs = run.pairs("pairs_train")
    tokenizer = load_tokenizer(base_path(cfg, run), trust_remote_code=cfg.model.trust_remote_code)
    tables = []
    for model in trained_models(cfg):
        mix_cfg = replace(cfg.mix, variant=MIX_VARIANT[model])
        mix = build_mix(
            rollouts,
            pairs,
            PromptFormat.of(tokenizer, cfg),
            mix_cfg,
            seed=cfg.run.seed,
            backbone=cfg.model.backbone,
        )
        mix.save(mix_dir(run, model))
        table = mix.counts_table()
        table.insert(0, "model", model)
        tables.append(table)
    counts = pd.concat(tables, ignore_index=True) if tables else pd.DataFrame()
    run.write_table("mix_counts", counts)
    return counts


def training_dir(run: RunFolder, model: str) -> Path:
    return run.path / "training" / model


def train_all(cfg: RunConfig, run: RunFolder) -> pd.DataFrame:
    """GRPO for every trained model (resuming from its last checkpoint); the final adapter and
    its model card are copied to adapters/<model>/. Returns one summary row per model."""
    rows = [train(cfg, run, m) for m in trained_models(cfg)]
    return pd.DataFrame(rows)


def train(cfg: RunConfig, run: RunFolder, model: str) -> dict[str, Any]:
    import shutil

    from rmlib.generation.models import resolve_precision
    from rmlib.generation.vllm import model_runner_env
    from rmlib.training.launch import SPEC_JSON, TrainJob, run_job
    from rmlib.training.mix import load_mix

    dest = run.adapter_dir(model)
    done = dest / "adapter_config.json"
    if done.exists():
        return {"model": model, "status": "done earlier", "adapter": str(dest)}
    dataset, _ = load_mix(mix_dir(run, model))
    if len(dataset) == 0:
        raise ValueError(
            f"the '{model}' training mix is empty (no pair had a wrong rollout): nothing to "
            "train on; use more training pairs or more rollouts per pair"
        )
    settings = cfg.grpo
    if settings.use_vllm and settings.vllm_max_model_length is None:
        # a mix with Refl. items holds prompts up to the reflection budget
        has_refl = "task" in dataset.column_names and "refl" in set(dataset["task"])
        prompt = cfg.prompts.longest_prompt_tokens() if has_refl else cfg.prompts.max_prompt_tokens
        settings = replace(settings, vllm_max_model_length=prompt + settings.max_completion_length)
    out = training_dir(run, model)
    job = TrainJob.of(
        settings,
        mix=str(mix_dir(run, model)),
        output=str(out),
        backbone=str(base_path(cfg, run)),
        precision=resolve_precision(cfg.model.train_precision)[0],
        trust_remote_code=cfg.model.trust_remote_code,
        seed=cfg.run.seed,
        enable_thinking=cfg.model.enable_thinking,
        env=model_runner_env(cfg.generation.model_runner),  # the colocated engine's runner
    )
    unlink_links(out)  # the trainer writes its checkpoints by name: never through a link
    pid = run_job(job, cfg.run.gpus)  # its own process(es): see rmlib.training.launch
    tmp = dest.with_name(dest.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    for f in Path(out).iterdir():
        if f.is_file() and f.name != SPEC_JSON:  # the launch job is the run's, not the adapter's
            shutil.copy2(f, tmp / f.name)
    shutil.rmtree(dest, ignore_errors=True)
    tmp.rename(dest)
    return {
        "model": model,
        "status": "trained",
        "items": len(dataset),
        "adapter": str(dest),
        "pid": pid,
    }


def training_log(cfg: RunConfig, run: RunFolder) -> pd.DataFrame:
    """Every trained model's progress table (step, reward, parse failures, KL), one `variant`
    column per model."""
    from rmlib.training.progress import progress_table

    frames = []
    for model in trained_models(cfg):
        try:
            df = progress_table(training_dir(run, model))
        except FileNotFoundError:
            continue
        df.insert(0, "variant", model)
        frames.append(df)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def importance_sampling_warning(cfg: RunConfig, log: pd.DataFrame) -> str | None:
    """03's one line when TRL's importance sampling cut too many sequences' weights
    (grpo.importance_sampling_warn_share); None when it did not or GRPO sampled without vLLM."""
    from rmlib.training.importance import cut_warning

    mode = cfg.grpo.trl.get("vllm_importance_sampling_mode", "")
    return cut_warning(log, cfg.grpo.importance_sampling_warn_share, mode)


def evaluate(cfg: RunConfig, run: RunFolder, model: str) -> dict[str, Any]:
    """Two-stage inference and every baseline for one model on the evaluation pairs.

    Writes tables rollouts_<model>, greedy_<model>, reflections_<model>, predictions_<model>;
    returns the call and failure counts (also merged into metrics.json under counts_<model>).
    A model whose stage 1 is another's (`stage1_model`: the reflection-only judge) runs stage 2
    only, on that model's stored stage-1 judgments: its predictions hold the methods stage 2
    decides, and its rollouts table is that model's.
    """
    from rmlib.reflect import run_reflectrm

    ref = model_ref(cfg, run, model)
    pairs = run.pairs("pairs_eval")
    infer = cfg.inference
    first = stage1_model(cfg, model)
    # every model of 04 shares the base's engine: it serves the trained adapters too
    if first == model:
        gen, tokenizer = backend(cfg, run, ref, with_adapters=True)
        stage2 = None
    else:
        gen, tokenizer = backend(cfg, run, model_ref(cfg, run, first), with_adapters=True)
        stage2, _ = backend(cfg, run, ref, with_adapters=True)
        infer = replace(infer, run_greedy=False)  # the greedy baseline is stage 1's model's
    result = run_reflectrm(
        pairs, gen, PromptFormat.of(tokenizer, cfg), infer, reflection_backend=stage2
    )
    for name, table in evaluation_tables(result, own_stage1=stage2 is None).items():
        run.write_table(f"{name}_{model}", table)
    stats = {"store": asdict(gen.stats)}
    if stage2 is not None:
        stats = {"store": asdict(stage2.stats), "stage1_store": asdict(gen.stats), "stage1": first}
    counts = {**result.counts, **stats, "model": asdict(ref)}
    run.update_metrics(f"counts_{model}", counts)
    return counts


def evaluation_tables(result: Any, own_stage1: bool = True) -> dict[str, pd.DataFrame]:
    """The tables 04 writes for one model from its `ReflectResult`. A judge reflecting on
    another model's stage 1 keeps only the methods its stage 2 decides: greedy, majority and
    the anchor alone would be the other model's verdicts under this model's name."""
    from rmlib.reflect import STAGE2_METHODS

    tables = result.tables()
    if not own_stage1:
        preds = tables["predictions"]
        tables["predictions"] = preds[preds["method"].isin(STAGE2_METHODS)].reset_index(drop=True)
    return tables


def counts_table(counts: dict[str, dict[str, Any]]) -> pd.DataFrame:
    """Calls, parse failures and truncations per model, one row per count."""
    rows = []
    for model, c in counts.items():
        for key, value in c.items():
            if isinstance(value, int | float):
                rows.append({"model": model, "count": key, "value": value})
            elif isinstance(value, dict) and key != "model":
                for sub, v in value.items():
                    rows.append({"model": model, "count": f"{key}.{sub}", "value": v})
    if not rows:
        return pd.DataFrame(columns=["count"])
    return pd.DataFrame(rows).pivot(index="count", columns="model", values="value")


def examples(pairs: Sequence[Pair], per_source: int = 1, max_chars: int = 400) -> pd.DataFrame:
    """The first pair(s) of each source, texts shortened for display."""
    seen: dict[str, int] = {}
    rows = []
    for p in pairs:
        if seen.get(p.source, 0) >= per_source:
            continue
        seen[p.source] = seen.get(p.source, 0) + 1
        rows.append(
            {
                "source": p.source,
                "subset": p.subset,
                "label": p.label,
                "query": _short(p.query, max_chars),
                "response1": _short(p.response1, max_chars),
                "response2": _short(p.response2, max_chars),
            }
        )
    return pd.DataFrame(rows)


def _short(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def worked_example(
    run: RunFolder, model: str, key: str | None = None, max_chars: int = 240
) -> pd.DataFrame:
    """One pair's stage 1 (verdicts, confidence, anchor, each critique's text) and stage 2 (each
    reflection call's output, and who beat the anchor).

    Picks, unless `key` is given, the first pair where ReflectRM's verdict and majority vote's
    differ (there the reflection decided something), else the first with a reflection call.
    Texts are cut to `max_chars` from their end, where a judgment concludes.
    """
    t = run.model_tables(model)
    rollouts, refl, preds = t["rollouts"], t.get("reflections"), t["predictions"]
    has_refl = refl is not None and len(refl)
    if key is None:
        key, why = _disagreeing_pair(preds)
        if key is None:
            key = refl["key"].iloc[0] if has_refl else rollouts["key"].iloc[0]
            why = "no pair where ReflectRM and majority vote disagree: the first pair"
        print(why)
    r = rollouts[rollouts.key == key][
        ["sample", "choice", "failure", "correct", "confidence", "n_tokens", "text"]
    ].copy()
    final = preds[(preds.key == key) & (preds.method == "reflectrm")]
    anchor = final["anchor"].iloc[0] if len(final) else None
    anchor = None if pd.isna(anchor) else int(anchor)  # no parsed rollout: no anchor
    r["role"] = ["anchor" if s == anchor else "" for s in r["sample"]]
    r["critique"] = [_tail(x, max_chars) for x in r.pop("text")]
    if has_refl:
        mine = refl[(refl.key == key) & (refl.method == "reflectrm")]
        wins = dict(zip(mine["i"], mine["other_wins"], strict=True))
        said = dict(zip(mine["i"], mine["text"], strict=True))
        r["beats_anchor"] = [wins.get(s) for s in r["sample"]]
        r["reflection"] = [_tail(said[s], max_chars) if s in said else "" for s in r["sample"]]
    label = rollouts[rollouts.key == key]["label"].iloc[0]
    verdict = final["verdict"].iloc[0] if len(final) else None
    majority = preds[(preds.key == key) & (preds.method == "majority")]["verdict"]
    majority = majority.iloc[0] if len(majority) else None
    print(f"pair {key}: label {label}; ReflectRM verdict {verdict}; majority vote {majority}")
    return r.set_index("sample")


def _disagreeing_pair(preds: pd.DataFrame) -> tuple[str | None, str]:
    by = preds[preds.method.isin(["reflectrm", "majority"])].pivot_table(
        index="key", columns="method", values="verdict", aggfunc="first", sort=False
    )
    if not {"reflectrm", "majority"} <= set(by.columns):
        return None, ""
    differ = by[by["reflectrm"].astype("Int64") != by["majority"].astype("Int64")].dropna()
    if differ.empty:
        return None, ""
    why = f"the first of {len(differ)} judged pairs where ReflectRM and majority vote disagree"
    return str(differ.index[0]), why


def _tail(text: str | None, n: int) -> str:
    text = " ".join(str(text or "").split())
    return text if len(text) <= n else "…" + text[-n:]
