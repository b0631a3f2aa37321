"""rmlib.training.sft: warm-up examples (both tasks, correct targets, exact generation prompts) and
a real LoRA SFT step on the tiny Qwen3 with completion-only loss, saved and merged."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from rmlib.data.demo import load_demo
from rmlib.generation.models import (
    SMOLLM2,
    TINY_QWEN3,
    load_backbone,
    load_tokenizer,
    merge_adapter,
    resolve_model,
)
from rmlib.judge.prompts import PromptBudget, PromptFormat, build_pref_prompt
from rmlib.judge.verdict import parse_verdict
from rmlib.run.config import load_config
from rmlib.training.sft import (
    WarmupConfig,
    build_sft_trainer,
    examples_cut,
    label_positions_only,
    refl_coins,
    warmup_dataset,
    warmup_pairs,
)

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def tokenizer():
    return load_tokenizer(TINY_QWEN3)


def test_examples_are_correct_judgments_of_both_tasks(tokenizer):
    cfg = WarmupConfig(n_examples=12, refl_share=0.25, refl_targets="correct")
    pairs = warmup_pairs(cfg, seed=0)
    assert len(pairs) == 12 and pairs[0].id != load_demo(split="train", n=1, seed=0).pairs[0].id
    ds = warmup_dataset(PromptFormat(tokenizer), pairs, cfg, seed=0)
    assert ds["task"].count("refl") == 3 and ds["task"].count("pref") == 9
    for pair, row in zip(pairs, ds, strict=True):
        verdict = parse_verdict(row["completion"], task=row["task"])
        if row["task"] == "pref":
            assert row["prompt"] == build_pref_prompt(tokenizer, pair, PromptBudget()).text
            assert verdict.choice == pair.label
            continue
        slot = verdict.choice  # the critique judged better must be the correct one
        good = row["prompt"].split(f"[Critique {slot} begins]")[1].split("ends]")[0]
        bad = row["prompt"].split(f"[Critique {3 - slot} begins]")[1].split("ends]")[0]
        assert f"Therefore Response {pair.label} is better." in good
        assert f"Therefore Response {3 - pair.label} is better." in bad
        assert "<Result>" not in good  # critiques shown as analysis only (the default)
    assert (
        ds.to_list() == warmup_dataset(PromptFormat(tokenizer), pairs, cfg, seed=0).to_list()
    )  # seeded


def _critique_conclusions(prompt: str) -> dict[int, int]:
    """Which response each critique shown in a Refl. prompt concludes is better."""
    out = {}
    for slot in (1, 2):
        text = prompt.split(f"[Critique {slot} begins]")[1].split("ends]")[0]
        out[slot] = 1 if "Therefore Response 1 is better." in text else 2
    return out


def test_format_refl_targets_teach_the_format_not_the_decision(tokenizer):
    """refl_targets='format' (the default): the base learns to write a reflection but is never
    taught which critique is right. Each decision is the next coin of its own stream (it sees
    neither the pair nor where the correct critique sits), its analysis only restates what each
    critique concludes, and so the decisions are right about as often as wrong; with 'correct'
    every decision picks the right critique (the test can fail)."""
    cfg = WarmupConfig(n_examples=40, refl_share=1.0)
    assert cfg.refl_targets == "format"
    pairs = warmup_pairs(cfg, seed=3)
    fmt = PromptFormat(tokenizer)
    coins = refl_coins(3)
    right = 0
    for pair, row in zip(pairs, warmup_dataset(fmt, pairs, cfg, seed=3), strict=True):
        verdict = parse_verdict(row["completion"], task="refl")
        assert verdict.ok and verdict.choice == next(coins)
        concl = _critique_conclusions(row["prompt"])
        assert sorted(concl.values()) == [1, 2]  # one critique right, one wrong
        analysis = row["completion"].split("</Analysis>")[0]
        assert "Therefore" not in analysis  # nothing of the pair's evidence
        for slot in (1, 2):
            assert f"Critique {slot} concludes that Response {concl[slot]} is better." in analysis
        right += concl[verdict.choice] == pair.label
    assert 12 <= right <= 28, right  # 40 fair coins: a 1-in-1000 band around 20
    taught = warmup_dataset(
        fmt, pairs, WarmupConfig(n_examples=40, refl_share=1.0, refl_targets="correct"), seed=3
    )
    for pair, row in zip(pairs, taught, strict=True):
        choice = parse_verdict(row["completion"], task="refl").choice
        assert _critique_conclusions(row["prompt"])[choice] == pair.label


def test_examples_cut_counts_those_over_max_length(tokenizer):
    cfg = WarmupConfig(n_examples=8, refl_share=0.5)
    ds = warmup_dataset(PromptFormat(tokenizer), warmup_pairs(cfg, seed=0), cfg, seed=0)
    lengths = sorted(len(tokenizer(r["prompt"] + r["completion"])["input_ids"]) for r in ds)
    assert examples_cut(tokenizer, ds, lengths[-1] + 1) == 0
    assert examples_cut(tokenizer, ds, lengths[0]) == 8
    assert examples_cut(tokenizer, ds, lengths[3] + 1) == 4


def test_the_demo_warmup_cuts_no_example():
    """The demo's reflections all ran to their cap while warmup.max_length (448) cut 15 of its 16
    Refl. examples: none may be cut, with the demo's own prompts and budgets."""
    cfg = load_config(ROOT / "params" / "demo.yaml")
    tok = load_tokenizer(resolve_model(SMOLLM2))
    pairs = warmup_pairs(cfg.warmup, seed=cfg.run.seed)
    ds = warmup_dataset(PromptFormat.of(tok, cfg), pairs, cfg.warmup, seed=cfg.run.seed)
    assert ds["task"].count("refl") == 16
    assert examples_cut(tok, ds, cfg.warmup.max_length) == 0
    assert examples_cut(tok, ds, 448) > 0  # the old limit cuts some (the test can fail)
    # a whole reflection target fits under the demo's stage-2 cap
    refl = [len(tok(r["completion"])["input_ids"]) for r in ds if r["task"] == "refl"]
    assert max(refl) + 1 <= cfg.inference.reflection_max_new_tokens


def test_examples_follow_the_runs_prompt_settings(tokenizer):
    """The run's prompts.critique_with_result, model.enable_thinking and the reflection budget
    reach the warm-up examples (the pipeline passes them; WarmupConfig has no copy of its own)."""
    cfg = WarmupConfig(n_examples=8, refl_share=0.5)
    pairs = warmup_pairs(cfg, seed=0)
    budget = PromptBudget(max_prompt_tokens=2048, max_reflection_prompt_tokens=4096)
    shown = PromptFormat(tokenizer, budget, enable_thinking=True, critique_with_result=True)
    ds = warmup_dataset(shown, pairs, cfg)
    assert ds["task"].count("refl") == 4
    for pair, row in zip(pairs, ds, strict=True):
        assert row["prompt"].endswith("<|im_start|>assistant\n") and "<think>" not in row["prompt"]
        if row["task"] == "pref":
            expected = build_pref_prompt(tokenizer, pair, budget, enable_thinking=True)
            assert row["prompt"] == expected.text
        else:
            critiques = row["prompt"].split("## Critiques for Judgment")[1].split("## Output")[0]
            assert critiques.count("<Result>") == 2  # shown with their result lines

    # a reflection limit below the longest Refl. example cuts it, and no Pref. example
    def tokens(text: str) -> int:
        return len(tokenizer(text, add_special_tokens=False)["input_ids"])

    plain = warmup_dataset(PromptFormat(tokenizer, budget), pairs, cfg)
    longest = max(tokens(r["prompt"]) for r in plain if r["task"] == "refl")
    tight = PromptBudget(max_prompt_tokens=2048, max_reflection_prompt_tokens=longest - 30)
    cut = warmup_dataset(PromptFormat(tokenizer, tight), pairs, cfg)
    assert any("[… truncated …]" in r["prompt"] for r in cut if r["task"] == "refl")
    for before, after in zip(plain, cut, strict=True):
        assert tokens(after["prompt"]) <= tight.limit(after["task"])
        if after["task"] == "pref":
            assert after["prompt"] == before["prompt"]


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.filterwarnings("ignore::FutureWarning")
def test_sft_step_trains_completion_only_and_merges(tokenizer, tmp_path):
    cfg = WarmupConfig(
        enabled=True,
        n_examples=2,
        refl_share=0.5,
        batch_size=2,
        epochs=1,
        learning_rate=1e-2,
        torch_threads=2,
    )
    ds = warmup_dataset(PromptFormat(tokenizer), warmup_pairs(cfg), cfg)
    trainer = build_sft_trainer(ds, cfg, tmp_path / "adapter", backbone=TINY_QWEN3)
    for example, row in zip(ds, trainer.train_dataset, strict=True):
        ids = [i for i, lab in zip(row["input_ids"], row["labels"], strict=True) if lab != -100]
        # the loss covers exactly the judgment and its end-of-turn token, never the prompt
        assert tokenizer.decode(ids) == example["completion"] + tokenizer.eos_token
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters() if p.requires_grad}
    result = trainer.train()
    assert trainer.state.global_step == 1 and torch.isfinite(torch.tensor(result.training_loss))
    moved = [
        n
        for n, p in trainer.model.named_parameters()
        if p.requires_grad and not torch.equal(p.detach(), before[n])
    ]
    # one step from B = 0 moves every B (A's gradient is zero until B is not)
    assert sorted(moved) == sorted(n for n in before if "lora_B" in n) and moved
    trainer.save_model(str(tmp_path / "adapter"))
    merged_dir = merge_adapter(TINY_QWEN3, tmp_path / "adapter", tmp_path / "merged", dtype="fp32")
    merged, tok = load_backbone(str(merged_dir), precision="fp32")
    base, _ = load_backbone(TINY_QWEN3, precision="fp32")
    q_merged = merged.model.layers[0].self_attn.q_proj.weight
    q_base = base.model.layers[0].self_attn.q_proj.weight
    assert not torch.allclose(q_merged, q_base)  # the adapter is in the merged weights
    assert tok.chat_template == tokenizer.chat_template


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.filterwarnings("ignore::FutureWarning")
def test_label_positions_only_scores_the_completion_alone_with_the_same_loss(tokenizer, tmp_path):
    """On CPU TRL scores every position with its fp32 LM head; inside label_positions_only only
    the labelled ones (the completion), with the same loss and gradients up to summation order,
    and the patch is undone afterwards."""
    from trl.trainer import utils as trl_utils

    cfg = WarmupConfig(
        enabled=True, n_examples=2, refl_share=0.5, batch_size=2, torch_threads=2, precision="fp32"
    )
    ds = warmup_dataset(PromptFormat(tokenizer), warmup_pairs(cfg), cfg)
    trainer = build_sft_trainer(ds, cfg, tmp_path / "adapter", backbone=TINY_QWEN3)
    batch = trainer.data_collator([trainer.train_dataset[i] for i in range(2)])
    scored: list[int] = []
    tile = trl_utils._ChunkedLogProbFunction.apply

    def counting(hidden, *args):
        scored.append(hidden.shape[0])
        return tile(hidden, *args)

    def loss_and_grads() -> tuple[float, list[torch.Tensor]]:
        trainer.model.zero_grad()
        loss = trainer.compute_loss(trainer.model, dict(batch))
        loss.backward()
        grads = [p.grad.clone() for p in trainer.model.parameters() if p.requires_grad]
        return float(loss), grads

    original = trl_utils._use_triton
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(trl_utils._ChunkedLogProbFunction, "apply", counting)
        full_loss, full_grads = loss_and_grads()
        with label_positions_only():
            assert trl_utils._use_triton is not original
            compact_loss, compact_grads = loss_and_grads()
    assert trl_utils._use_triton is original
    labelled = int((batch["labels"][:, 1:] != -100).sum())
    positions = batch["labels"][:, 1:].numel()
    assert scored == [positions, labelled] and labelled < positions / 2
    assert compact_loss == pytest.approx(full_loss, rel=1e-5)
    for a, b in zip(full_grads, compact_grads, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)
