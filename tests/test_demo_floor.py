"""benchmarks/demo_floor.py's arithmetic: hand-counted tokens → FLOPs → seconds on a tiny shape."""

from __future__ import annotations

import math

import pytest

from tests.scripts import load_script

floor = load_script("benchmarks/demo_floor.py")

# 1 layer, hidden 2, MLP 3, one head of 2, vocab 5: q, k, v, o = 2x2 each (16), MLP 3 x 2x3 (18)
TINY = floor.Shape(layers=1, hidden=2, intermediate=3, heads=1, kv_heads=1, head_dim=2, vocab=5)


def test_parameter_counts_by_hand():
    assert TINY.body_params == 34 and TINY.head_params == 10
    smollm2 = floor.Shape.of(
        {
            "num_hidden_layers": 30,
            "hidden_size": 576,
            "intermediate_size": 1536,
            "num_attention_heads": 9,
            "num_key_value_heads": 3,
            "head_dim": 64,
            "vocab_size": 49152,
        }
    )
    # 30 x (576 x 64 x (2 x 9 + 2 x 3) + 3 x 576 x 1536) = 30 x (884,736 + 2,654,208)
    assert smollm2.body_params == 106_168_320
    assert smollm2.head_params == 28_311_552


def test_forward_prefill_decode_and_training_flops_by_hand():
    # 2 new tokens, nothing cached: (query, key) pairs 1 + 2 = 3, x 4 x 1 layer x 2 = 24
    assert floor.attention_flops(TINY, 2) == 24
    assert floor.forward_flops(TINY, 2, scored=1) == 2 * 34 * 2 + 24 + 2 * 10
    # a 3-token prompt, 1 cached: 2 tokens computed, pairs 2 x 1 + 3 = 5 -> 40
    assert floor.prefill_flops(TINY, 3, cached=1) == 136 + 40
    # 2 new after 3: one forward (the last is never fed back) attending 4 keys, 2 head rows
    assert floor.decode_flops(TINY, 3, 2) == 68 + 32 + 40
    assert floor.decode_flops(TINY, 3, 0) == 0
    # LoRA: forward and activation gradients (2 x linear) + 3 x attention; full: 3 x linear
    linear = 2 * 34 * 2 + 2 * 10 * 1
    assert floor.train_flops(TINY, 2, 1) == 2 * linear + 3 * 24
    assert floor.train_flops(TINY, 2, 1, lora=False) == 3 * linear + 3 * 24
    assert floor.seconds(4e9, 2.0) == 2.0


def test_prefix_sharing_and_stage1_items():
    items = floor.shared_prefill({"k": 0}, [("k", 10), ("k", 12)], {"k": 6})
    assert items == [(6, 0), (10, 6), (12, 6)]
    work = floor.prefill_work(TINY, "04", "p", items, "fp32")
    assert work.tokens == 6 + 4 + 6  # against 22 without sharing
    shared, unshared, decode = floor.stage1_items([100, 50], n=2, new=[8, 8])
    assert shared == [(100, 0), (50, 0)]
    assert len(unshared) == 6 and sum(new for _, new in decode) == 6 * 8
    assert floor.decode_work(TINY, "04", "d", [(3, 2)], "fp32").flops == 140


def test_table_totals_and_ratio():
    work = [
        floor.Work("02", "a", 10, 4e9, "fp32"),
        floor.Work("02", "b", 5, 2e9, "bf16", in_total=False),
        floor.Work("02", "m: c", 3, 1e9, "bf16"),
    ]
    rows = floor.table(work, {"fp32": 2.0, "bf16": 1.0}, measured_s=9.0)
    assert [r["part"] for r in rows] == ["a", "(b)", "m: c", "total"]
    total = rows[-1]
    assert total["tokens"] == 13 and total["floor_s"] == 3.0
    assert total["measured/floor"] == 3.0
    assert floor.subtotal(work, {"fp32": 2.0, "bf16": 1.0}, "m") == 1.0


def test_padding_and_parsing():
    assert floor.padded_tokens([1, 1, 1, 5], batch=4) == 20
    assert floor.padded_tokens([1, 1, 1, 5], batch=1) == 8
    assert floor.parse_pairs("02=1079, 04/base=870") == {"02": 1079.0, "04/base": 870.0}
    assert floor.parse_pairs("150", default_key="all") == {"all": 150.0}
    with pytest.raises(ValueError):
        floor.parse_pairs("150")


def test_gemm_rate_is_measured():
    rates = floor.measure_gflops("fp32", TINY, tokens=(8,), budget_s=0.01)
    assert set(rates) == {8} and math.isfinite(rates[8]) and rates[8] > 0


def test_a_pairs_reflection_prompts_share_the_pair_part():
    from rmlib.data.demo import load_demo
    from rmlib.generation.models import TINY_QWEN3, load_tokenizer
    from rmlib.judge.prompts import PromptFormat

    fmt = PromptFormat(load_tokenizer(TINY_QWEN3))
    [pair] = load_demo(split="eval", n=1, seed=0).pairs
    n = floor.pair_prefix(fmt, pair)
    prompt = fmt.refl(pair, "x", "y")
    shared = fmt.tokenizer.decode(
        fmt.tokenizer(prompt.text, add_special_tokens=False)["input_ids"][:n]
    )
    assert pair.response2.strip()[-20:] in shared and "## Critiques for Judgment" in shared
    assert "x" not in shared.partition("[Critique 1 begins]")[2]
    assert floor.refl_cap(fmt, pair, 0) == fmt.refl(pair, "", "").n_tokens


def test_a_runs_own_token_counts_replace_the_caps(tmp_path):
    import pandas as pd

    from rmlib.data.settings import load_split
    from rmlib.generation.models import TINY_QWEN3, load_tokenizer
    from rmlib.judge.prompts import PromptFormat
    from rmlib.run.config import load_config
    from rmlib.run.folder import RunFolder

    cfg = load_config("params/demo.yaml", {"eval.models": ["base"]})
    fmt = PromptFormat.of(load_tokenizer(TINY_QWEN3), cfg)
    key = load_split(cfg.data.eval[0], cfg.run.seed).pairs[0].key
    run = RunFolder(tmp_path)
    stage1 = {"key": [key, key], "prompt_tokens": [100, 100], "n_tokens": [10, 20]}
    run.write_table("rollouts_base", pd.DataFrame(stage1))
    greedy = {"key": [key], "prompt_tokens": [100], "n_tokens": [5]}
    run.write_table("greedy_base", pd.DataFrame(greedy))
    refl = {"key": [key, key], "prompt_tokens": [300, 300], "n_tokens": [7, 9]}
    run.write_table("reflections_base", pd.DataFrame(refl))
    rows = {w.part: w for w in floor.eval_work(cfg, fmt, TINY, run, floor.Lengths(fmt))}
    assert rows["base: stage 1 prefill, 1 prompts"].tokens == 100  # samples and greedy share it
    assert rows["base: stage 1 prefill, no sharing"].tokens == 300
    assert rows["base: stage 1 decode (the run's)"].tokens == 35
    assert rows["base: stage 2 decode (the run's)"].tokens == 16
    prefix = min(floor.pair_prefix(fmt, load_split(cfg.data.eval[0], 0).pairs[0]), 300)
    shared = rows["base: stage 2 prefill, 2 calls, pair part shared"]
    assert shared.tokens == prefix + 2 * (300 - prefix) < 600


def test_grpo_steps_from_the_progress_table():
    rows = [
        {"completions/mean_length": 16.0, "num_tokens": 418.0},
        {"completions/mean_length": 16.0, "num_tokens": 938.0},
        {"completions/mean_length": None, "num_tokens": 1000.0},  # a summary row: skipped
    ]
    # 2 completions a step: (418 - 0) / 2 - 16 = 193, then (938 - 418) / 2 - 16 = 244
    assert floor.grpo_steps(rows, completions=2, prompt=50.0) == [(193.0, 16.0), (244.0, 16.0)]
    rows[1]["num_tokens"] = None  # no running count: the estimated prompt
    assert floor.grpo_steps(rows, completions=2, prompt=50.0) == [(50.0, 16.0), (50.0, 16.0)]
    assert floor.grpo_steps([], completions=2, prompt=50.0) == []


def test_typical_lengths_are_the_warm_up_targets_within_their_caps():
    from rmlib.data.demo import load_demo, reference_analysis
    from rmlib.generation.models import TINY_QWEN3, load_tokenizer
    from rmlib.judge.prompts import PromptFormat, format_judgment

    fmt = PromptFormat(load_tokenizer(TINY_QWEN3))
    [pair] = load_demo(split="eval", n=1, seed=0).pairs
    target = format_judgment(reference_analysis(pair, "evidence"), pair.label)
    n = len(fmt.tokenizer(target, add_special_tokens=False)["input_ids"]) + 1
    typical = floor.Lengths(fmt, "typical", "evidence")
    assert typical.pref_new(pair, 10_000) == n and typical.pref_new(pair, 5) == 5
    assert floor.Lengths(fmt).pref_new(pair, 128) == 128
    assert 0 < typical.refl_new(pair, 10_000) < 100  # "Critique 1 concludes ... " and a verdict
    assert typical.refl_prompt(pair, 128) > fmt.pref(pair).n_tokens
