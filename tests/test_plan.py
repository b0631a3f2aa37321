"""The dry run's plan: counts by hand per notebook, memory against the card, constants and their
sources (assumed until a gpu_check file measures them), the table, and no torch import."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from rmlib.run.config import load_config
from rmlib.workbook import plan as planner

ROOT = Path(__file__).resolve().parents[1]


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "rmlib", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _rows(plan: dict) -> dict[str, dict]:
    return {r["notebook"]: r for r in plan["per_notebook"]}


def _profile(name: str, **overrides) -> object:
    return load_config(ROOT / "params" / f"{name}.yaml", overrides or None)


# A file shaped like `benchmarks/gpu_check.py --output FILE` (keys as that script writes
# them); the numbers are made up for the test, not a measurement.
GPU_CHECK = {
    "check": "gpu_check --vllm",
    "device": "NVIDIA H100 80GB HBM3",
    "model": "Qwen3-4B shape, random weights",
    "settings": {"prompt_tokens": 1507, "completion_tokens": 1024, "group": 8},
    "peak_reserved_gib": 15.2,
    "generated_tokens_per_s": 555.0,
    "train_tokens_per_s": 4321.0,
    "vllm": {
        "grpo_colocate": {
            "status": "ran",
            "generated_tokens_per_s": 3333.0,
            "train_tokens_per_s": 9876.0,
            "sync_s_per_sync": 1.5,
            "device_used_gib": 41.0,
        },
        "engine": {
            "engine_start_s": 77.0,
            "batches": {
                "1": {"generated_tokens_per_s": 150.0},
                "64": {"generated_tokens_per_s": 4000.0},
                "256": {"generated_tokens_per_s": 12345.0},
            },
        },
    },
}


def test_smoke_counts_by_hand_per_notebook():
    cfg = _profile("smoke")
    rows = _rows(planner.plan(cfg))
    # 02: 8 training pairs x 2 rollouts; warm-up 8 examples / batch 4 = 2 steps (1 epoch)
    assert rows["02_rollouts"]["generations"] == 8 * 2
    assert rows["02_rollouts"]["generated_tokens_upper_bound"] == 8 * 2 * 24
    assert rows["02_rollouts"]["prompt_tokens_upper_bound"] == 8 * 1024
    assert rows["02_rollouts"]["optimizer_steps"] == 2
    # 03: only 'unified' is trained; mix 1:0 -> <= 8 Pref. items; max_steps 2 sets the count;
    # a step is 2 completions (micro-batch 2 x accumulation 1) = 1 prompt x group 2
    assert rows["03_training"]["optimizer_steps"] == 2
    assert rows["03_training"]["generations"] == 2 * 2
    assert rows["03_training"]["generated_tokens_upper_bound"] == 2 * 2 * 16
    # 04: 4 pairs x 2 orders x 2 models x (greedy + 2 samples + 1 reflection x 2 anchors)
    assert rows["04_inference"]["generations"] == 4 * 2 * 2 * (1 + 2 + 2)
    assert rows["04_inference"]["generated_tokens_upper_bound"] == 4 * 2 * 2 * 5 * 24
    for nb in ("01_data", "05_results", "06_analysis_quality", "07_position_bias"):
        assert rows[nb]["generations"] == rows[nb]["optimizer_steps"] == 0
    # a reflection-only judge makes its stage-2 calls only (stage 1 is unified's, stored)
    ablation = _profile("smoke", **{"eval.models": ["base", "unified", "refl_only"]})
    p = planner.plan(ablation)
    assert _rows(p)["04_inference"]["generations"] == 4 * 2 * (2 * (1 + 2 + 2) + 2)
    assert p["generations"]["eval/refl_only/demo"] == 4 * 2 * 2
    # the random anchor on RewardBench and RMB only (the default): none on the demo set
    default = _profile("smoke", **{"inference.random_anchor_sources": ["rewardbench", "rmb"]})
    assert _rows(planner.plan(default))["04_inference"]["generations"] == 4 * 2 * 2 * (1 + 2 + 1)


def test_grpo_steps_follow_trl_batching():
    paper = _profile("qwen3-4b-paper")
    # the paper's counts win over the exact 4:1 (mix.exact caps): 13,692 Pref. + 3,420 Refl.
    mix = planner.mix_items_upper_bound(paper, "unified", 38_459)
    assert mix == {"pref": 13_692, "refl": 3_420, "total": 17_112}
    assert planner.mix_items_upper_bound(paper, "rft", 38_459) == {
        "pref": 13_692,
        "refl": 0,
        "total": 13_692,
    }
    # the ablation models: Pref. at the mix's volume, within the pool (which max_pref does not
    # cap, as in the mix itself); the mix's Refl. items
    same = planner.mix_items_upper_bound(paper, "same_volume", 38_459)
    assert same == {"pref": 17_112, "refl": 0, "total": 17_112}
    assert planner.mix_items_upper_bound(paper, "refl_only", 38_459) == {
        "pref": 0,
        "refl": 3_420,
        "total": 3_420,
    }
    assert planner.paper_mix("unified") == {"pref": 13_692, "refl": 3_420}
    sched = planner.grpo_schedule(paper.grpo, mix["total"])
    # the paper's batch: 64 prompts x 8 = 512 completions a step (micro-batch 4 x accumulation
    # 128), generated at once: 17,112 // 64 = 267 whole rollout steps (24 prompts dropped), each
    # read 512 / 4 = 128 times -> 34,176 micro-batches / 128 = 267 steps an epoch, x 3 epochs
    assert sched["prompts_per_step"] == 64 and sched["completions_per_step"] == 512
    assert sched["steps_per_epoch"] == 267 and sched["steps"] == 801
    assert sched["generations"] == 801 * 512
    # rft: 13,692 // 64 = 213 rollout steps (60 dropped) an epoch, x 3
    assert planner.grpo_schedule(paper.grpo, 13_692)["steps"] == 639
    # uncapped, 4:1 on 38,459 HelpSteer3 pairs: Refl. floor(38,459 / 4) = 9,614, Pref. 4 x 9,614
    # -> 48,070 // 64 = 751 rollout steps an epoch (6 dropped), 2,253 in 3 epochs
    uncapped = _profile(
        "qwen3-4b-paper", **{"mix.exact": "ratio", "mix.max_pref": None, "mix.max_refl": None}
    )
    mix = planner.mix_items_upper_bound(uncapped, "unified", 38_459)
    assert mix == {"pref": 38_456, "refl": 9_614, "total": 48_070}
    assert planner.grpo_schedule(uncapped.grpo, mix["total"])["steps"] == 2_253
    same = planner.mix_items_upper_bound(uncapped, "same_volume", 38_459)
    assert same == {"pref": 38_459, "refl": 0, "total": 38_459}
    quick = _profile("qwen3-4b-quick")
    assert planner.grpo_schedule(quick.grpo, 1_250)["steps"] == 60  # max_steps, not the epoch
    # by epochs: generation batch 64 = 8 prompts; 20 items make 2 whole batches (4 dropped),
    # each read 64 / 8 = 8 times -> 16 micro-batches / accumulation 8 = 2 steps an epoch
    epochs = _profile("qwen3-4b-quick", **{"grpo.max_steps": -1, "grpo.num_train_epochs": 3})
    assert planner.grpo_schedule(epochs.grpo, 20)["steps"] == 2 * 3
    assert planner.grpo_schedule(quick.grpo, 7)["steps"] == 0  # < 8 prompts: nothing to train


def test_paper_profile_plans_both_protocols():
    paper = _profile("qwen3-4b-paper")
    p = planner.plan(paper)
    rows = {r["benchmark"]: r for r in p["protocols"]}
    # Table 1: every pair in the given order; Table 5: all of JudgeBench, 1,000 of the others
    assert rows["judgebench"]["consistency_pairs"] == rows["judgebench"]["pairs"] == 350
    for name in ("rewardbench", "rm-bench", "rmb", "ppe"):
        r = rows[name]
        assert r["accuracy_pairs"] == r["pairs"] > 1000 and r["consistency_pairs"] == 1000
        assert r["judged_pair_orders"] == r["pairs"] + 1000
    assert sum(r["generations"] for r in rows.values()) == p["per_notebook"][3]["generations"]
    # per pair and order, 3 models x (greedy + 8 samples + 7 reflections), + 7 more for the
    # random anchor on RewardBench and RMB only (the paper's inference ablation)
    assert planner.eval_calls(paper, "judgebench")["generations"] == 1 + 8 + 7
    assert rows["judgebench"]["generations"] == 700 * 3 * (1 + 8 + 7)
    assert rows["rm-bench"]["generations"] == 12_943 * 3 * (1 + 8 + 7)
    assert rows["ppe"]["generations"] == 17_038 * 3 * (1 + 8 + 7)
    assert rows["rewardbench"]["generations"] == 3_985 * 3 * (1 + 8 + 2 * 7)
    assert rows["rmb"]["generations"] == 18_131 * 3 * (1 + 8 + 2 * 7)
    assert p["per_notebook"][3]["generations"] == 2_998_692
    text = planner.format_plan(p)
    assert "consistency (both orders)" in text and "judgebench" in text
    # the dry run's GRPO lines: at most the paper's volume, with the paper's counts beside
    unified = "GRPO unified: mix ≤ 13,692 Pref. + 3,420 Refl. = 17,112 items (paper, Qwen3-4B: "
    assert unified + "13,692 + 3,420)" in text
    assert (
        "GRPO rft: mix ≤ 13,692 Pref. + 0 Refl. = 13,692 items (paper, Qwen3-4B: 13,692 + 0)"
        in text
    )
    assert p["optimizer_steps"] == 801 + 639
    # one order: nothing for Table 5
    given = planner.plan(
        _profile(
            "qwen3-4b-paper", **{"inference.swapped_pairs": None, "inference.both_orders": False}
        )
    )
    assert all(r["consistency_pairs"] == 0 for r in given["protocols"])


def test_reflection_prompts_are_planned_at_their_own_budget():
    cfg = _profile("qwen3-4b-quick", **{"prompts.max_reflection_prompt_tokens": 8192})
    inf, budgets = cfg.inference, cfg.prompts
    assert (budgets.max_prompt_tokens, budgets.max_reflection_prompt_tokens) == (4096, 8192)
    # stage 1 at the judgment budget; the first reflection prompt at the reflection budget, each
    # later one adding its two critiques
    reflections = (inf.n_samples - 1) * 2  # the anchor's and the random anchor's
    assert planner.eval_calls(cfg, "rewardbench")["prompt_tokens"] == (
        4096 + 8192 + (reflections - 1) * 2 * inf.max_new_tokens
    )
    # JudgeBench: no random anchor (the paper reports it on RewardBench and RMB)
    assert planner.eval_calls(cfg, "judgebench")["prompt_tokens"] == (
        4096 + 8192 + (inf.n_samples - 2) * 2 * inf.max_new_tokens
    )
    narrow = _profile("qwen3-4b-quick", **{"prompts.max_reflection_prompt_tokens": 4096})
    wide, small = _rows(planner.plan(cfg)), _rows(planner.plan(narrow))
    assert (
        wide["04_inference"]["prompt_tokens_upper_bound"]
        > (small["04_inference"]["prompt_tokens_upper_bound"])
    )
    # the unified mix holds Refl. items: a micro-batch may be at the reflection budget
    assert wide["03_training"]["peak_gpu_gib"] > small["03_training"]["peak_gpu_gib"]
    assert (
        wide["03_training"]["prompt_tokens_upper_bound"]
        > (small["03_training"]["prompt_tokens_upper_bound"])
    )
    assert wide["02_rollouts"] == small["02_rollouts"]  # rollouts are judgment prompts only
    # a Pref.-only mix (rft) never holds a reflection prompt: its training is at the judgment
    # budget whatever the reflection budget
    rft = {"eval.models": ["base", "rft"]}
    rft_wide = _rows(
        planner.plan(
            _profile("qwen3-4b-quick", **rft, **{"prompts.max_reflection_prompt_tokens": 8192})
        )
    )["03_training"]
    rft_small = _rows(
        planner.plan(
            _profile("qwen3-4b-quick", **rft, **{"prompts.max_reflection_prompt_tokens": 4096})
        )
    )["03_training"]
    assert rft_wide["peak_gpu_gib"] == rft_small["peak_gpu_gib"]
    assert rft_wide["prompt_tokens_upper_bound"] == rft_small["prompt_tokens_upper_bound"]


def test_mix_caps_keep_the_ratio():
    cfg = _profile("qwen3-4b-quick", **{"mix.max_pref": 100})
    assert planner.mix_items_upper_bound(cfg, "unified", 1_000) == {
        "pref": 100,
        "refl": 25,
        "total": 125,
    }
    cfg = _profile("qwen3-4b-quick", **{"mix.max_refl": 10})
    assert planner.mix_items_upper_bound(cfg, "unified", 1_000)["pref"] == 40


def test_quick_profile_fits_a_24gb_card_with_margin():
    cfg = _profile("qwen3-4b-quick")
    assert cfg.model.train_precision == "nf4" and cfg.grpo.use_vllm
    small = planner.plan(cfg, gpu="24gb")
    rows = _rows(small)
    assert small["fits_gpu"] is True
    assert all(r["fits"] for r in rows.values() if r["peak_gpu_gib"] is not None)
    training = rows["03_training"]
    assert training["peak_gpu_gib"] <= 0.9 * 22.5
    assert not any("colocated engine" in n for n in training["notes"])
    # the trainer's base in NF4, the colocated engine's the unquantized checkpoint
    assert training["memory"]["weights_gib"] == pytest.approx(2.47, abs=0.01)
    assert training["memory"]["engine_weights_gib"] == pytest.approx(7.49, abs=0.01)
    big = planner.plan(cfg, gpu="h100-80gb")
    assert big["fits_gpu"] is True
    assert _rows(big)["02_rollouts"]["peak_gpu_gib"] == pytest.approx(0.85 * 79.2, abs=0.01)


def test_the_old_bf16_quick_recipe_is_over_a_24gb_card():
    cfg = _profile(
        "qwen3-4b-quick",
        **{
            "model.train_precision": "bf16",
            "grpo.vllm_gpu_memory_utilization": 0.3,
            "grpo.per_device_train_batch_size": 8,
            "grpo.gradient_accumulation_steps": 8,
            "prompts.max_reflection_prompt_tokens": 8192,
        },
    )
    small = _rows(planner.plan(cfg, gpu="24gb"))["03_training"]
    # bf16 trainer beside a colocated engine with 30 % of the card: over 22.5 GiB, and the
    # engine's share cannot hold the 7.5 GiB of bf16 weights
    assert small["fits"] is False and small["peak_gpu_gib"] > 22.5
    assert any("colocated engine" in n for n in small["notes"])
    assert small["memory"]["weights_gib"] == pytest.approx(4.022e9 * 2 / 1024**3, rel=1e-3)


def test_paper_profile_trains_qlora_and_fits_80gb():
    cfg = _profile("qwen3-4b-paper")
    assert cfg.model.train_precision == "nf4"
    assert planner.plan(cfg, gpu="h100-80gb")["fits_gpu"] is True


@pytest.mark.parametrize("profile", ["qwen3-4b-quick", "qwen3-4b-paper", "smoke"])
@pytest.mark.parametrize("gpu", ["24gb", "h100-80gb"])
def test_memory_terms_sum_to_the_peak(profile, gpu):
    rows = planner.plan(_profile(profile), gpu=gpu)["per_notebook"]
    for r in rows:
        if r["peak_gpu_gib"] is None:
            continue
        phases: dict[str, float] = {}
        for t in r["memory_terms"]:
            phases[t["phase"]] = phases.get(t["phase"], 0.0) + t["gib"]
        assert r["memory_terms"], r["notebook"]
        assert max(phases.values()) == pytest.approx(r["peak_gpu_gib"], abs=0.05), r["notebook"]
    training = _rows({"per_notebook": rows})["03_training"]
    terms = {t["term"] for t in training["memory_terms"]}
    assert {
        "weights_gib",
        "lora_params_gib",
        "lora_grads_gib",
        "adamw_states_gib",
        "activations_gib",
        "logits_gib",
        "workspace_gib",
    } <= terms


def test_engine_terms_split_its_share_and_grpo_logits_are_a_tile():
    cfg = _profile("qwen3-4b-quick")
    rows = _rows(planner.plan(cfg, gpu="24gb"))
    m = rows["03_training"]["memory"]
    share = cfg.grpo.vllm_gpu_memory_utilization * 22.5
    assert m["engine_weights_gib"] + m["engine_kv_cache_gib"] + m["engine_reserve_gib"] == (
        pytest.approx(share, abs=0.02)
    )
    # TRL 1.16's fused LM head: one fp32 tile of the micro-batch's completion tokens x 32,768
    scored = cfg.grpo.per_device_train_batch_size * cfg.grpo.max_completion_length
    assert m["logits_gib"] == pytest.approx(scored * 32768 * 4 / 1024**3, abs=0.01)
    assert rows["02_rollouts"]["memory"]["engine_kv_cache_gib"] == pytest.approx(
        0.85 * 22.5 - 7.49 - 1.5, abs=0.02
    )


def test_a_qlora_colocated_engine_holds_bf16_weights():
    """nf4 + use_vllm: the trainer's base is 4-bit, the engine's is the unquantized checkpoint,
    so 30 % of a 24 GB card cannot hold it (NF4's 2.5 GiB would have fit)."""
    cfg = _profile(
        "qwen3-4b-quick",
        **{"model.train_precision": "nf4", "grpo.vllm_gpu_memory_utilization": 0.3},
    )
    small = _rows(planner.plan(cfg, gpu="24gb"))["03_training"]
    notes = [n for n in small["notes"] if "colocated engine" in n]
    assert notes and "weights (7.5 GiB)" in notes[0]


def test_model_facts():
    qwen = planner.model_facts("Qwen/Qwen3-4B")
    assert qwen.kv_bytes_per_token(2) == 147_456
    assert qwen.params == pytest.approx(4.02e9, rel=1e-3)
    assert planner.model_facts("someone/unknown-model") is None


def test_embedded_facts_agree_with_rmlib_models():
    models = pytest.importorskip("rmlib.generation.models")  # imports torch
    for name, dims in (
        ("Qwen/Qwen3-4B", models.QWEN3_4B_DIMS),
        (models.TINY_QWEN3, models.TINY_QWEN3_DIMS),
    ):
        _, table = planner.KNOWN_MODELS[name]
        assert {k: table[k] for k in dims} == dims
    smollm = models.cache_dir() / "smollm2-135m-instruct-bf16-v1"
    if (smollm / "config.json").is_file():  # built by the demo; else nothing to compare
        local = planner.model_facts(str(smollm))
        known = planner.model_facts(models.SMOLLM2)
        assert local.params == known.params and local.kv_dim == known.kv_dim


def test_local_config_is_read_and_unknown_is_said(tmp_path):
    _, dims = planner.KNOWN_MODELS["Qwen/Qwen3-4B"]
    (tmp_path / "config.json").write_text(json.dumps(dims))
    assert planner.model_facts(str(tmp_path)).params == planner.model_facts("Qwen/Qwen3-4B").params
    (tmp_path / "config.json").write_text(json.dumps({**dims, "num_experts": 64}))
    assert planner.model_facts(str(tmp_path)) is None  # a mixture of experts: not guessed
    for key, bad in (("num_attention_heads", 0), ("num_hidden_layers", -2), ("head_dim", 0)):
        (tmp_path / "config.json").write_text(json.dumps({**dims, key: bad}))
        with pytest.raises(ValueError) as info:  # before: a ZeroDivisionError or negative hours
            planner.model_facts(str(tmp_path))
        assert str(info.value) == (
            f"{tmp_path / 'config.json'}: {key}: expected a whole number of 1 or more, got {bad}"
        )
    plan = planner.plan(_profile("qwen3-4b-quick", **{"model.backbone": "someone/x"}))
    training = _rows(plan)["03_training"]
    assert training["peak_gpu_gib"] is None and training["fits"] is None
    assert plan["model"]["facts"] == "unknown" and training["optimizer_steps"] == 60


def test_constants_are_assumed_until_measured(tmp_path):
    cfg = _profile("qwen3-4b-quick")
    constants = planner.plan(cfg)["gpu"]["constants"]
    assert {c["source"] for c in constants.values()} == {planner.ASSUMED, planner.SPEC}
    assert all(c["basis"] for c in constants.values())
    path = tmp_path / "gpu_check.json"
    path.write_text(json.dumps(GPU_CHECK))
    plan = planner.plan(cfg, gpu_constants=path)
    constants = plan["gpu"]["constants"]
    assert plan["gpu"]["class"] == "h100-80gb"  # from the file's device
    decode = constants["vllm_decode_tokens_per_s"]
    assert decode["source"] == planner.MEASURED and decode["value"] == 12345.0
    assert "batches.256" in decode["basis"] and "NVIDIA H100" in decode["basis"]
    assert constants["train_tokens_per_s_nf4"]["value"] == 4321.0
    # the weight sync is timed apart from training (train_s excludes it)
    assert constants["grpo_sync_s"]["source"] == planner.MEASURED
    assert constants["grpo_sync_s"]["value"] == 1.5
    failed = {**GPU_CHECK, "vllm": {**GPU_CHECK["vllm"], "grpo_colocate": {"status": "failed"}}}
    path.write_text(json.dumps(failed))  # a failed part measured nothing to plan with
    assert planner.plan(cfg, gpu_constants=path)["gpu"]["constants"]["grpo_sync_s"]["source"] == (
        planner.ASSUMED
    )
    path.write_text(json.dumps(GPU_CHECK))
    # gpu_check trains the NF4 base only: the bf16 trainer's rate stays assumed
    assert constants["train_tokens_per_s_bf16"]["source"] == planner.ASSUMED
    assert constants["vllm_prefill_tokens_per_s"]["source"] == planner.ASSUMED  # not measured
    slower = planner.plan(cfg)
    assert _rows(plan)["04_inference"]["hours"] < _rows(slower)["04_inference"]["hours"]
    mismatch = planner.plan(cfg, gpu="h200", gpu_constants=path)
    assert any("measured on NVIDIA H100" in n for n in mismatch["notes"])


def test_a_trainer_only_check_measures_the_trainer_and_names_what_stays_assumed(tmp_path):
    """gpu_check --trainer-only (a GPU machine without vLLM): the NF4 trainer's rate and peak
    are measured; the engine's constants stay assumed, and the dry run says which."""
    trainer_only = {
        "check": "gpu_check --trainer-only",
        "device": "NVIDIA H200",
        "settings": {"prompt_tokens": 5120, "completion_tokens": 512, "group": 8},
        "peak_source": "trainer",
        "peak_reserved_gib": 11.5,
        "train_tokens_per_s": 2500.0,
        "generated_tokens_per_s": None,
        "trainer": {"status": "ran"},
        "vllm": {
            "grpo_colocate": {"status": "unrun", "why": "--trainer-only"},
            "engine": {"status": "unrun", "why": "--trainer-only"},
        },
    }
    path = tmp_path / "trainer.json"
    path.write_text(json.dumps(trainer_only))
    constants = planner.plan(_profile("qwen3-4b-quick"), gpu_constants=path)["gpu"]["constants"]
    assert constants["train_tokens_per_s_nf4"]["source"] == planner.MEASURED
    assert constants["train_tokens_per_s_nf4"]["value"] == 2500.0
    assert constants["grpo_sync_s"]["source"] == planner.ASSUMED  # no engine: no sync measured
    for name in ("vllm_decode_tokens_per_s", "vllm_engine_start_s"):
        assert constants[name]["source"] == planner.ASSUMED
    out = _cli("run", "params/qwen3-4b-quick.yaml", "--dry-run", "--gpu-constants", str(path))
    assert out.returncode == 0, out.stderr
    assert "NF4 trainer 11.5 GiB reserved" in out.stdout
    assert (
        "(gpu_check --trainer-only measured no value for hf_generate_tokens_per_s, "
        "grpo_vllm_generate_tokens_per_s, vllm_engine_start_s, grpo_sync_s, "
        "vllm_decode_tokens_per_s: they stay assumed)"
    ) in out.stdout


def test_a_tiny_gpu_check_is_refused(tmp_path):
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps({**GPU_CHECK, "check": "gpu_check --tiny", "device": "cpu"}))
    with pytest.raises(ValueError, match="not a GPU run"):
        planner.plan(_profile("smoke"), gpu_constants=path)
    out = _cli("run", "params/smoke.yaml", "--dry-run", "--gpu-constants", str(path))
    assert out.returncode == 1 and "not a GPU run" in out.stderr and "Traceback" not in out.stderr


def test_cli_prints_the_table_and_measured_constants(tmp_path):
    path = tmp_path / "gpu_check.json"
    path.write_text(json.dumps(GPU_CHECK))
    out = _cli("run", "params/qwen3-4b-quick.yaml", "--dry-run", "--gpu-constants", str(path))
    assert out.returncode == 0, out.stderr
    text = out.stdout
    header = next(line for line in text.splitlines() if line.startswith("notebook"))
    columns = ("generations", "gen. tokens", "opt. steps", "peak GPU GiB", "exp. hours", "hours ≤")
    for column in columns:
        assert column in header
    for nb in ("01_data", "02_rollouts", "03_training", "04_inference", "total"):
        assert any(line.startswith(nb) for line in text.splitlines())
    assert "measured: gpu_check on NVIDIA H100 80GB HBM3" in text
    assert "assumed (unmeasured): compute-bound prefill" in text  # gpu_check does not measure it
    small = _cli("run", "params/qwen3-4b-quick.yaml", "--dry-run", "--gpu", "24gb")
    training = next(line for line in small.stdout.splitlines() if line.startswith("03_training"))
    assert " yes " in training  # the 24 GB profile
    # the memory model, term by term
    assert "memory by term (GiB, estimates; card 22.5 GiB)" in small.stdout
    assert "03_training, trainer (nf4) + colocated engine = " in small.stdout
    for term in ("activations_gib", "logits_gib", "adamw_states_gib", "engine_kv_cache_gib"):
        assert term in small.stdout
    bad = _cli("run", "params/smoke.yaml", "--dry-run", "--gpu", "tpu")
    assert bad.returncode == 2 and "unknown GPU class 'tpu'" in bad.stderr


def test_sweep_dry_run_still_plans_every_point(tmp_path):
    params = tmp_path / "sweep.yaml"
    text = (ROOT / "params" / "smoke.yaml").read_text()
    params.write_text(text + '\nsweep:\n  mix.ratio: ["1:0", "4:1"]\n')
    out = _cli("sweep", str(params), "--dry-run")
    assert out.returncode == 0, out.stderr
    points = json.loads(out.stdout)
    assert [p["point"]["mix.ratio"] for p in points] == ["1:0", "4:1"]
    assert all(p["plan"]["per_notebook"] for p in points)


def test_dry_run_imports_no_torch():
    """Nor does its check of grpo.trl's keys (set here, so the check runs)."""
    code = (
        "import sys; from rmlib.cli import main; "
        "assert main(['run', 'params/qwen3-4b-paper.yaml', '--dry-run', "
        "'--set', 'grpo.trl={num_iterations: 2}']) == 0; "
        "assert 'torch' not in sys.modules, 'torch imported'; "
        "assert main(['run', 'params/smoke.yaml', '--dry-run', "
        "'--set', 'grpo.trl={num_iteration: 2}']) == 1; "
        "assert 'torch' not in sys.modules, 'torch imported'"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr


# ---------------------------------------------------------------- issue #20: a plan to plan with


def test_paper_plan_has_the_papers_volume_expected_below_upper_on_1_and_8_gpus():
    cfg = _profile("qwen3-4b-paper")
    one, eight = planner.plan(cfg), planner.plan(cfg, gpu_count=8)
    for p in (one, eight):
        parts = {part["part"]: part for part in _rows(p)["03_training"]["parts"]}
        assert parts["GRPO unified"]["mix_items_upper_bound"]["total"] == 17_112
        assert parts["GRPO rft"]["mix_items_upper_bound"]["total"] == 13_692
        for row in p["per_notebook"]:
            if row["hours"] is not None:
                assert 0 < row["hours_expected"] < row["hours"], row["notebook"]
                assert row["generated_tokens_expected"] < row["generated_tokens_upper_bound"]
    assert one["gpu_count"] == 1 and eight["gpu_count"] == 8
    # as profiled (one in-process engine): 8 ranks share GRPO's work, 02 and 04 keep one engine
    for nb in ("02_rollouts", "04_inference"):
        assert _rows(eight)[nb]["hours_expected"] == _rows(one)[nb]["hours_expected"], nb
    grpo = [_rows(p)["03_training"]["hours_expected"] for p in (one, eight)]
    assert 6 < grpo[0] / grpo[1] < 8
    assert [s["gpus"] for s in one["scaling"]] == [1, 2, 4, 8]
    assert one["scaling"][3]["hours_expected"] == pytest.approx(eight["hours_expected"], abs=0.01)
    assert _rows(eight)["03_training"]["optimizer_steps"] == 1_440  # same global batch
    # served (one vLLM server a GPU): every notebook's work is shared; engine starts and
    # weight syncs do not shrink
    served = _profile("qwen3-4b-paper", **{"generation.backend": "served"})
    one_s, eight_s = planner.plan(served), planner.plan(served, gpu_count=8)
    assert 6 < one_s["hours_expected"] / eight_s["hours_expected"] < 8


def test_night_profile_fits_a_night_on_one_h100():
    cfg = _profile("qwen3-4b-night")
    p = planner.plan(cfg, gpu="h100-80gb")
    assert cfg.run.gpu_class == "h100-80gb" and p["fits_gpu"]
    assert p["hours_expected"] <= 12 < p["hours_estimate"]
    header = (ROOT / "params" / "qwen3-4b-night.yaml").read_text().split("\nrun:")[0]
    assert f"{p['optimizer_steps']} optimizer steps" in header  # the header says what it runs


def test_gpu_classes_are_set_on_the_gpu_profiles():
    assert _profile("qwen3-4b-quick").run.gpu_class == "24gb"
    assert _profile("qwen3-4b-paper").run.gpu_class == "h100-80gb"
    assert _profile("demo").run.gpu_class is None  # CPU profiles: nothing to check


def test_gpu_count_defaults_to_run_gpus_and_the_cli_takes_it():
    cfg = _profile("qwen3-4b-quick", **{"run.gpus": 4})
    assert planner.plan(cfg)["gpu_count"] == 4
    out = _cli("run", "params/qwen3-4b-paper.yaml", "--dry-run", "--gpu-count", "8")
    assert out.returncode == 0, out.stderr
    assert "8 x GPU class h100-80gb" in out.stdout and "<- this plan" in out.stdout
    bad = _cli("run", "params/smoke.yaml", "--dry-run", "--gpu-count", "3")
    assert bad.returncode == 2
    alone = _cli("run", "params/smoke.yaml", "--gpu-count", "2")
    assert alone.returncode == 2 and "go with --dry-run" in alone.stderr


def test_expected_lengths_follow_the_lengths_file(tmp_path):
    cfg = _profile("qwen3-4b-paper")
    base = planner.plan(cfg)
    used = {r["source"]: r for r in base["lengths"]}
    assert used["rewardbench"]["from"] == planner.MEASURED
    assert used["helpsteer3"]["from"] == planner.ASSUMED  # hub-only here
    path = tmp_path / "lengths.json"
    entry = {"pairs": 10, "path": "x", "tokenizer": "qwen3", "prompt_tokens": {"mean": 3000.0}}
    path.write_text(json.dumps({"helpsteer3": entry}))
    longer = planner.plan(cfg, lengths=path)
    used = {r["source"]: r for r in longer["lengths"]}
    assert used["helpsteer3"]["prompt_tokens"] == 3000.0
    assert used["helpsteer3"]["from"] == planner.MEASURED
    rows, base_rows = _rows(longer), _rows(base)
    # 02 prefills each training pair's judgment prompt once: 38,459 pairs at their mean
    assert rows["02_rollouts"]["prompt_tokens_expected"] == 38_459 * 3000
    assert base_rows["02_rollouts"]["prompt_tokens_expected"] == 38_459 * 1400  # built-in
    assert (
        rows["02_rollouts"]["prompt_tokens_upper_bound"]
        == (base_rows["02_rollouts"]["prompt_tokens_upper_bound"])
    )
    # the same file through plan.lengths, and a bad file is one clear error
    assert (
        planner.plan(_profile("qwen3-4b-paper", **{"plan.lengths": str(path)}))["lengths"]
        == (longer["lengths"])
    )
    path.write_text("[1, 2]")
    with pytest.raises(ValueError, match="not a lengths file"):
        planner.plan(cfg, lengths=path)


def test_judgment_lengths_and_easy_share_are_parameters():
    short = _profile("qwen3-4b-paper", **{"plan.judgment_tokens": 100})
    long = _profile("qwen3-4b-paper", **{"plan.judgment_tokens": 5000})
    rows_short, rows_long = _rows(planner.plan(short)), _rows(planner.plan(long))
    # capped at max_new_tokens (1,024): the long one is the upper bound
    assert (
        rows_long["02_rollouts"]["generated_tokens_expected"]
        == (rows_long["02_rollouts"]["generated_tokens_upper_bound"])
    )
    assert rows_short["02_rollouts"]["generated_tokens_expected"] == 38_459 * 8 * 100
    # a pool too small for the caps: the mix shrinks, and with it GRPO's steps
    quick = _profile("qwen3-4b-quick", **{"plan.easy_share": 0.5, "grpo.max_steps": -1})
    part = _rows(planner.plan(quick))["03_training"]["parts"][0]
    assert part["mix_items_expected"]["pref"] == 500 < part["mix_items_upper_bound"]["pref"]


def test_training_flops_count_every_forward_trl_runs():
    from rmlib.workbook.plan.constants import train_flops_per_param

    paper = _profile("qwen3-4b-paper").grpo
    assert train_flops_per_param(paper)[0] == 10
    plain = _profile(
        "qwen3-4b-paper",
        **{"grpo.beta": 0.0, "grpo.use_vllm": False, "grpo.gradient_checkpointing": False},
    ).grpo
    assert train_flops_per_param(plain) == (4, "2 policy forward + 2 backward (LoRA)")
    off = _profile(
        "qwen3-4b-paper", **{"grpo.trl": {"vllm_importance_sampling_correction": False}}
    ).grpo
    assert "old-log-prob" not in train_flops_per_param(off)[1]  # steps aligned: no old forward
    assert any(
        "10 x params" in n
        for n in _rows(planner.plan(_profile("qwen3-4b-paper")))["03_training"]["notes"]
    )


def test_decode_is_bandwidth_bound_at_small_batch_compute_bound_at_large():
    cfg = _profile("qwen3-4b-paper")
    est = planner.Estimator(
        cfg,
        planner.gpu_class("h100-80gb"),
        planner.plan_constants(planner.gpu_class("h100-80gb"), None)[0],
    )
    rate1, batch1, bound1 = est.decode_rate(67.0, "bf16", 50, 1)
    rate256, batch256, bound256 = est.decode_rate(67.0, "bf16", 50, 10_000)
    assert (batch1, bound1) == (1, "bandwidth") and batch256 == 256 and bound256 == "compute"
    assert rate1 < rate256
    # at 500 tokens of context each, 256 sequences' KV outweighs the weights: bandwidth again
    assert est.decode_rate(67.0, "bf16", 500, 10_000)[2] == "bandwidth"
    # a longer context fills the KV room with fewer sequences: a smaller batch, a lower rate
    rate_long, batch_long, _ = est.decode_rate(67.0, "bf16", 8000, 10_000)
    assert batch_long < 256 and rate_long < est.decode_rate(67.0, "bf16", 500, 10_000)[0]
    # the colocated engine's small share caps its batch
    _, batch_small, _ = est.decode_rate(0.3 * 79.2, "bf16", 2000, 512)
    assert batch_small < 512


def test_smallest_detectable_difference_by_hand():
    cfg = _profile("qwen3-4b-quick")
    d = planner.plan(cfg)["detectable_difference"]
    # (1.96 + 0.8416) * sqrt(0.15 / 300) = 6.26 points a benchmark; the mean of two: / sqrt(2)
    assert [r["points"] for r in d["per_benchmark"]] == [6.26, 6.26]
    assert d["mean_over_benchmarks"] == pytest.approx(6.26 / 2**0.5, abs=0.01)
    paper = planner.plan(_profile("qwen3-4b-paper"))["detectable_difference"]
    assert 1.2 < paper["mean_over_benchmarks"] < 1.4


def test_plan_section_does_not_change_the_params_hash():
    from rmlib.workbook.execute import params_hash

    a = _profile("smoke")
    b = _profile("smoke", **{"plan.easy_share": 0.9})
    c = _profile("smoke", **{"rollouts.n_samples": 3})
    assert params_hash(a) == params_hash(b) != params_hash(c)


def _cpu_file(path: Path, scale: float = 1.0, **constants: float) -> Path:
    """A CPU constants file: 5 GB/s and 0.05 TFLOPS (times `scale`), an engine start of 35 s."""
    from rmlib.workbook.plan.calibrate import write_cpu_constants

    write_cpu_constants(
        path,
        device="cpu: test",
        precision="fp32",
        bandwidth_gb_s=5.0 * scale,
        tflops=0.05 * scale,
        memory_gib=24,
        constants={"vllm_engine_start_s": 35.0, **constants},
    )
    return path


def test_cpu_calibration_compares_predictions_with_a_runs_times(tmp_path):
    from rmlib.workbook.plan.calibrate import compare, format_comparison, measured_seconds

    path = _cpu_file(tmp_path / "cpu.json", notebook_overhead_s=6.0)
    cfg = _profile("demo")
    p = planner.plan(cfg, gpu_constants=path)
    assert p["gpu"]["class"] == "cpu"
    c = p["gpu"]["constants"]
    assert c["vllm_engine_start_s"]["source"] == planner.MEASURED
    assert c["vllm_engine_start_s"]["value"] == 35.0
    rows = _rows(p)
    assert rows["02_rollouts"]["seconds_expected"]["engine_start"] == 35.0
    # twice the bandwidth and FLOPS: every model-work part takes half as long
    faster = _cpu_file(tmp_path / "faster.json", scale=2.0, notebook_overhead_s=6.0)
    fast = _rows(planner.plan(cfg, gpu_constants=faster))
    for part in ("warmup", "prefill", "decode"):
        assert fast["02_rollouts"]["seconds_expected"][part] == pytest.approx(
            rows["02_rollouts"]["seconds_expected"][part] / 2, rel=0.02
        )
    # on a CPU adapters are merged ('auto'): 04 starts one engine per model (base, unified)
    assert rows["04_inference"]["seconds_expected"]["engine_start"] == 35.0 * 2
    # a measured train_mfu replaces the assumed share of the FLOPS (achieved: 1.0) in training
    mfu = planner.plan(cfg, gpu_constants=_cpu_file(tmp_path / "mfu.json", train_mfu=0.25))
    assert mfu["gpu"]["constants"]["train_mfu"]["unit"] == "share"
    assert _rows(mfu)["02_rollouts"]["seconds_expected"]["warmup"] == pytest.approx(
        rows["02_rollouts"]["seconds_expected"]["warmup"] * 4, rel=0.02
    )
    run = tmp_path / "run"
    run.mkdir()
    predicted = {nb: rows[nb]["hours_expected"] * 3600 for nb in ("02_rollouts", "03_training")}
    state = {
        "01_data": {"status": "completed", "seconds": 4.0},
        "02_rollouts": {"status": "completed", "seconds": predicted["02_rollouts"] * 1.25},
        "03_training": {"status": "completed", "seconds": predicted["03_training"] / 2},
        "04_inference": {"status": "failed", "cell_index": 3},
    }
    (run / "state.json").write_text(json.dumps(state))
    measured = measured_seconds(run)
    assert set(measured) == {"01_data", "02_rollouts", "03_training"}  # the failed one is not
    table = {r["notebook"]: r for r in compare(p, measured)}
    assert set(table) == {"02_rollouts", "03_training"}  # 01 has no model work to predict
    assert table["02_rollouts"]["within"] and table["02_rollouts"]["ratio"] == pytest.approx(0.8)
    assert not table["03_training"]["within"] and table["03_training"]["ratio"] == pytest.approx(2)
    text = format_comparison(list(table.values()))
    assert "OUTSIDE +-30%" in text and "NOT all of 2 notebooks" in text
    with pytest.raises(ValueError, match="no state.json"):
        measured_seconds(tmp_path)


def test_data_stats_writes_length_statistics(tmp_path):
    out = tmp_path / "lengths.json"
    for split in ("train", "eval"):
        run = _cli("data", "stats", "demo", "--split", split, "--lengths", str(out))
        assert run.returncode == 0, run.stderr
    data = json.loads(out.read_text())
    assert list(data) == ["demo"]  # one entry a source: the later call replaced it
    entry = data["demo"]
    assert entry["tokenizer"] == "qwen3" and entry["pairs"] > 0
    assert entry["pair_tokens"]["mean"] > 0
    # the rendered prompt adds instructions and the chat template to the pair's text
    assert entry["prompt_tokens"]["mean"] > entry["pair_tokens"]["mean"]
    assert (
        entry["prompt_tokens"]["p50"]
        <= entry["prompt_tokens"]["p90"]
        <= entry["prompt_tokens"]["max"]
    )
    plan = planner.plan(_profile("demo"), lengths=out)
    assert {r["source"]: r["from"] for r in plan["lengths"]}["demo"] == planner.MEASURED


def test_calibrate_cpu_is_one_command(tmp_path):
    """benchmarks/calibrate_cpu.py with a constants file given (no measuring): predicts the demo
    and prints the comparison; its exit status says whether every notebook is within."""
    from rmlib.workbook.plan.calibrate import write_cpu_constants

    path = tmp_path / "cpu.json"
    write_cpu_constants(
        path,
        device="cpu: test",
        precision="fp32",
        bandwidth_gb_s=5.0,
        tflops=0.05,
        memory_gib=24,
        constants={"vllm_engine_start_s": 35.0},
    )
    predicted = _rows(planner.plan(_profile("demo"), gpu_constants=path))
    seconds = {nb: predicted[nb]["hours_expected"] * 3600 for nb in ("02_rollouts", "04_inference")}
    script = ROOT / "benchmarks" / "calibrate_cpu.py"
    args = [sys.executable, str(script), "--constants", str(path), "--no-measure-lengths"]
    near = [f"--measured={nb}={s * 1.1}" for nb, s in seconds.items()]
    out = subprocess.run([*args, *near], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "all of 2 notebooks within +-30%" in out.stdout
    far = [f"--measured={nb}={s * 3}" for nb, s in seconds.items()]
    out = subprocess.run([*args, *far], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 1 and "OUTSIDE" in out.stdout


def test_a_full_disk_leaves_the_earlier_lengths_file_whole(tmp_path):
    """`rmlib data stats --lengths` adds its entry through a temporary file renamed over the
    old one: a disk that fills mid-write (a file size limit, as `ulimit -f`) is one line naming
    the file, and the sources it held are kept. One subprocess (about 2 s)."""
    import resource

    from rmlib.workbook.plan.lengths import write_lengths

    out = tmp_path / "lengths.json"
    write_lengths(out, "demo", {"prompt_tokens": {"mean": 200.0}, "pairs": 8})
    before = out.read_bytes()
    code = (
        "from rmlib.workbook.plan.lengths import write_lengths\n"
        f"write_lengths({str(out)!r}, 'rewardbench', "
        "{'prompt_tokens': {'mean': 500.0}, 'note': 'x' * 20000})\n"
    )

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))

    run = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, preexec_fn=limit
    )
    assert run.returncode == 1
    assert run.stderr.strip().splitlines()[-1] == (
        f"OSError: {out}: the lengths file could not be written (File too large); its earlier "
        "entries are kept as they were"
    )
    assert out.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["lengths.json"]  # no temporary file left


def _sweep_file(tmp_path: Path, sweep: str, name: str = "smoke") -> Path:
    params = tmp_path / "sweep.yaml"
    text = (ROOT / "params" / "smoke.yaml").read_text()
    params.write_text(text + f"\nsweep:\n{sweep}\n")
    if name != "smoke":
        params.write_text(params.read_text().replace("name: smoke", f"name: {name}", 1))
    return params


def test_sweep_points_differing_only_in_spaces_or_slashes_get_their_own_folders():
    from rmlib.workbook.execute import point_name

    values = ["a b", "ab", "a/b", "a_b", "a%2Fb", "a\\b"]
    names = [point_name("r", {"prompts.system": v}) for v in values]
    assert len(set(names)) == len(values)
    assert names[:3] == ["r-system=a%20b", "r-system=ab", "r-system=a%2Fb"]


@pytest.mark.parametrize(
    ("sweep", "name", "line"),
    [
        # a value given twice: the comparison would count one run twice
        (
            "  mix.ratio: ['4:1', '1:0', '4:1']\n",
            "smoke",
            "sweep points {'mix.ratio': '4:1'} and {'mix.ratio': '4:1'} would share the run "
            "folder 'smoke-ratio=4:1'",
        ),
        ("  mix.ratio: ['1:0', '4:1']\n", "s" * 250, "is 260 bytes, over the 255"),
    ],
)
def test_a_sweep_whose_folders_collide_or_are_too_long_is_refused_before_the_first_point(
    tmp_path, monkeypatch, sweep, name, line
):
    from rmlib.run.config import load_config as load
    from rmlib.workbook import execute as runner

    params = _sweep_file(tmp_path, sweep, name)
    monkeypatch.setattr(runner, "execute", lambda *a, **k: pytest.fail("a point ran"))
    with pytest.raises(ValueError, match=re.escape(line)):
        runner.sweep(params, progress=False)
    with pytest.raises(ValueError, match=re.escape(line)):  # the dry run's own check
        runner.sweep_runs(params, load(params))


def test_gpu_with_a_cpu_constants_file_is_refused_not_ignored(tmp_path):
    """Before: the CPU file's card was planned and --gpu dropped without a word."""
    path = _cpu_file(tmp_path / "cpu.json")
    with pytest.raises(ValueError, match=r"^--gpu h100-80gb and .*cpu.json \(a CPU constants file"):
        planner.plan(_profile("demo"), gpu="h100-80gb", gpu_constants=path)
    assert planner.plan(_profile("demo"), gpu_constants=path)["gpu"]["class"] == "cpu"
