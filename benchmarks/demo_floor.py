"""The compute floor of each demo notebook: the work it does, counted without running the model,
set against a matmul rate, so a notebook's measured time can be read as a distance to its floor.

From a params file (default params/demo.yaml, `--set` overrides as in demo_warmup.py) the script
counts, with the demo's real tokenizer and real prompts (`PromptFormat.of`, the demo pairs, the
warm-up examples of `warmup_dataset`):

- 02: the warm-up's training tokens (prompt + completion + end token of each example, cut at
  warmup.max_length, × epochs) and the rollouts (each training pair's Pref. prompt, n samples of
  at most rollouts.max_new_tokens);
- 03: per trained model, each GRPO step's generation (its prompts, each completion at most
  grpo.max_completion_length) and its passes over prompt + completion: the policy's forward and
  backward, the reference's forward (grpo.beta > 0) and the old policy's forward (TRL computes it
  whenever vLLM generates: importance-sampling correction);
- 04: per evaluated model, stage 1 (the judged pairs in both orders, n samples and the greedy
  judgment on one prompt) and stage 2 (N-1 reflection calls per judged pair, N-1 more for the
  random anchor where it runs; each call's prompt is the pair, then two critiques of at most
  inference.max_new_tokens each; at most reflection_max_new_tokens new tokens).

Without a run folder every generation is at its cap: an upper bound on the work, so the floor
it gives is the floor of the worst case; `--typical` takes each generation as long as the
warm-up's own targets instead (what the warmed judge was taught to write: an estimate). With
`--run outputs/demo` the run's own tables replace the caps (rollouts_train,
rollouts_/greedy_/reflections_<model>: their prompt_tokens and n_tokens columns;
training/<model>/progress.jsonl: completions/mean_length, and the prompts from TRL's running
token count), and the run's params.yaml is read unless --params is given.

FLOPs (SmolLM2-135M: 30 layers, hidden 576, MLP 1536, 9 query / 3 key-value heads of 64;
106.2 M parameters outside the embedding, 28.3 M in the tied embedding / LM head):
- a forward pass: 2 × non-embedding parameters per token, plus attention's quadratic term,
  4 × layers × heads × head_dim per (query, key) pair of the causal mask: at a 1,000-token
  prompt that is about 16 % of the linear work, not negligible; plus the LM head, 2 × vocab ×
  hidden, only at the positions scored (one per generated token; in training, the completion's);
- prefill with prefix sharing (vLLM's prefix caching): a prompt's shared part is computed once;
  the n samples and the greedy judgment of a Pref. prompt share all of it, a pair's reflection
  calls the pair part (everything before the first critique). The rows "(no prefix sharing)"
  show the prefill without it and are left out of the totals;
- LoRA training: forward, then the gradients of the activations through the frozen weights
  (as much again as the forward's linear work, twice its attention work); the frozen weights get
  no weight gradients, so ≈ 4 × params × tokens instead of full fine-tuning's 6 × params ×
  tokens; LoRA's own matrices (r=16: under 2 % of the linear work) are left out. Padding is left
  out too (the floor of a batch is its real tokens); the warm-up's padded tokens, for random
  batches of warmup.batch_size, are printed under its table.

Seconds: FLOPs / the matmul rate of each stage's precision (model.precision for generation,
model.train_precision for GRPO, warmup.precision for the warm-up; 'auto' as the run resolves it
on this machine). `--measure` times torch GEMMs of the model's MLP shape (tokens × 576 by
576 × 1536, 256 to 2,048 tokens, on all torch threads, about a second each) in fp32 and bf16 and
takes each precision's best rate; `--gflops fp32=X,bf16=Y` (or one number for both) gives them.
`--measured-s 02=1079,03=443,04=2203` adds each notebook's measured time and measured / floor;
a key `04/base=870` sets one model's share of a notebook against that model's rows.

    python benchmarks/demo_floor.py --measure --measured-s 01=7,02=1079,03=443,04=2203
    python benchmarks/demo_floor.py --measure --typical --measured-s 04=2203,04/base=870
    python benchmarks/demo_floor.py --run outputs/demo --gflops fp32=150

The floor counts matrix products only: model loads, engine starts, the merge, tokenizing,
sampling and Python are not in it, so measured / floor is what they and a rate below the GEMM's
cost together.
"""

# no `from __future__ import annotations`: tests load this file as a module that is not in
# sys.modules (tests/scripts.py), where dataclasses cannot resolve string annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# ---------------------------------------------------------------- the arithmetic (pure)


@dataclass(frozen=True)
class Shape:
    """A decoder's matmul shapes (Llama/Qwen-style: q, k, v, o and a gated MLP per layer)."""

    layers: int
    hidden: int
    intermediate: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int

    @classmethod
    def of(cls, config: dict[str, Any]) -> "Shape":
        """From a checkpoint's config.json."""
        heads = int(config["num_attention_heads"])
        return cls(
            layers=int(config["num_hidden_layers"]),
            hidden=int(config["hidden_size"]),
            intermediate=int(config["intermediate_size"]),
            heads=heads,
            kv_heads=int(config.get("num_key_value_heads") or heads),
            head_dim=int(config.get("head_dim") or config["hidden_size"] // heads),
            vocab=int(config["vocab_size"]),
        )

    @property
    def body_params(self) -> int:
        """Parameters of the matmuls every token runs through (no embedding, no LM head)."""
        attn = self.hidden * self.head_dim * (2 * self.heads + 2 * self.kv_heads)
        return self.layers * (attn + 3 * self.hidden * self.intermediate)

    @property
    def head_params(self) -> int:
        return self.vocab * self.hidden


def attention_flops(shape: Shape, new: int, past: int = 0) -> float:
    """QKᵀ and AV for `new` tokens after `past` cached ones, causal: each query attends to every
    earlier key and itself; 2 FLOPs × 2 products × heads × head_dim per (query, key) pair."""
    pairs = new * past + new * (new + 1) / 2
    return 4.0 * shape.layers * shape.heads * shape.head_dim * pairs


def forward_flops(shape: Shape, new: int, past: int = 0, scored: int = 0) -> float:
    """A forward pass over `new` tokens after `past` cached ones, the LM head at `scored`
    positions."""
    return (
        2.0 * shape.body_params * new
        + attention_flops(shape, new, past)
        + 2.0 * shape.head_params * scored
    )


def prefill_flops(shape: Shape, length: int, cached: int = 0) -> float:
    """A prompt of `length` tokens whose first `cached` are in the cache already (its logits
    row is counted with the first generated token: `decode_flops`)."""
    return forward_flops(shape, max(length - cached, 0), cached)


def decode_flops(shape: Shape, prompt: int, new: int) -> float:
    """`new` generated tokens after a `prompt`: each one's LM head row, and a forward of every
    generated token but the last (the first attends prompt + 1 keys)."""
    if new <= 0:
        return 0.0
    return forward_flops(shape, new - 1, prompt) + 2.0 * shape.head_params * new


def train_flops(shape: Shape, seq: int, scored: int, lora: bool = True) -> float:
    """One sequence's forward and backward: `seq` tokens, the loss at `scored` positions.
    Backward: the activations' gradients (the forward's linear work again, twice its attention
    work) and, for full fine-tuning only, the weights' gradients (the linear work once more)."""
    linear = 2.0 * shape.body_params * seq + 2.0 * shape.head_params * scored
    attn = attention_flops(shape, seq)
    return (2.0 if lora else 3.0) * linear + 3.0 * attn


def seconds(flops: float, gflops: float) -> float:
    """Time at a rate of `gflops` GFLOP/s."""
    return flops / (gflops * 1e9)


@dataclass(frozen=True)
class Work:
    """One row of a notebook's table: a kind of work, its tokens and FLOPs."""

    notebook: str
    part: str
    tokens: int
    flops: float
    precision: str = "fp32"
    in_total: bool = True


def prefill_work(
    shape: Shape, notebook: str, part: str, items: Iterable[tuple[int, int]], precision: str
) -> Work:
    """Prefill of (length, cached) items: the tokens computed and their FLOPs."""
    items = list(items)
    tokens = sum(max(n - c, 0) for n, c in items)
    flops = sum(prefill_flops(shape, n, c) for n, c in items)
    return Work(notebook, part, tokens, flops, precision)


def decode_work(
    shape: Shape, notebook: str, part: str, calls: Iterable[tuple[int, int]], precision: str
) -> Work:
    """Decoding of (prompt, new tokens) calls."""
    calls = list(calls)
    return Work(
        notebook,
        part,
        sum(new for _, new in calls),
        sum(decode_flops(shape, p, new) for p, new in calls),
        precision,
    )


def shared_prefill(
    prompts: dict[str, int], calls: Sequence[tuple[str, int]], prefix: dict[str, int]
) -> list[tuple[int, int]]:
    """Prefill items when every call of a key shares its first `prefix[key]` tokens: the
    prefix once per key, then each call's rest (its length, the prefix cached)."""
    items = [(prefix[k], 0) for k in prompts if any(c == k for c, _ in calls)]
    return items + [(n, prefix[k]) for k, n in calls]


def stage1_items(
    prompt_tokens: Sequence[int], n: int, new: Sequence[int], greedy: bool = True
) -> tuple[list[tuple[int, int]], list[tuple[int, int]], list[tuple[int, int]]]:
    """Stage 1 of prompts whose requests each write `new[i]` tokens: prefill shared (once per
    prompt), prefill unshared (once per request: n samples and the greedy), and the (prompt,
    new) decode calls."""
    per = n + (1 if greedy else 0)
    shared = [(p, 0) for p in prompt_tokens]
    unshared = [(p, 0) for p in prompt_tokens for _ in range(per)]
    decode = [(p, m) for p, m in zip(prompt_tokens, new, strict=True) for _ in range(per)]
    return shared, unshared, decode


def table(
    work: Sequence[Work], rates: dict[str, float], measured_s: float | None = None
) -> list[dict[str, Any]]:
    """A notebook's rows (tokens, GFLOP, floor seconds at its precision's rate) and its total;
    with `measured_s`, the total row holds it and measured / floor."""
    rows = []
    for w in work:
        s = seconds(w.flops, rates[w.precision])
        rows.append(
            {
                "part": w.part if w.in_total else f"({w.part})",
                "tokens": w.tokens,
                "GFLOP": round(w.flops / 1e9, 1),
                "precision": w.precision,
                "floor_s": round(s, 1),
            }
        )
    counted = [w for w in work if w.in_total]
    floor = sum(seconds(w.flops, rates[w.precision]) for w in counted)
    total: dict[str, Any] = {
        "part": "total",
        "tokens": sum(w.tokens for w in counted),
        "GFLOP": round(sum(w.flops for w in counted) / 1e9, 1),
        "precision": "",
        "floor_s": round(floor, 1),
    }
    if measured_s is not None:
        total["measured_s"] = measured_s
        total["measured/floor"] = round(measured_s / floor, 1) if floor else math.nan
    return rows + [total]


def subtotal(work: Sequence[Work], rates: dict[str, float], model: str) -> float:
    """Floor seconds of one model's counted rows (parts named '<model>: ...')."""
    return sum(
        seconds(w.flops, rates[w.precision])
        for w in work
        if w.in_total and w.part.startswith(f"{model}:")
    )


def grpo_steps(
    rows: Sequence[dict[str, Any]], completions: int, prompt: float
) -> list[tuple[float, float]]:
    """(prompt, completion) tokens of an average completion of each GRPO step, from the progress
    table's rows: completions/mean_length, and the prompt from TRL's running count of tokens
    seen (num_tokens: prompts and completions, no padding) where every row has it, else
    `prompt`. Empty when no row has a mean length."""
    rows = [r for r in rows if r.get("completions/mean_length") is not None]
    seen = [r.get("num_tokens") for r in rows]
    out, before = [], 0.0
    for r, total in zip(rows, seen, strict=True):
        c = float(r["completions/mean_length"])
        p = prompt
        if None not in seen:
            p = (float(total) - before) / completions - c
            before = float(total)
        out.append((p, c))
    return out


def parse_pairs(text: str | None, default_key: str | None = None) -> dict[str, float]:
    """'02=1079,03=443' → {'02': 1079.0, '03': 443.0}; a bare number goes to `default_key`."""
    out: dict[str, float] = {}
    for item in filter(None, (text or "").split(",")):
        key, sep, value = item.partition("=")
        if not sep:
            if default_key is None:
                raise ValueError(f"expected KEY=NUMBER, got {item!r}")
            key, value = default_key, item
        out[key.strip()] = float(value)
    return out


def padded_tokens(lengths: Sequence[int], batch: int, draws: int = 200, seed: int = 0) -> float:
    """Expected tokens computed when random batches of `batch` examples are padded to their
    longest (the mean over `draws` seeded shuffles of one epoch)."""
    import random

    rng = random.Random(seed)
    order = list(lengths)
    total = 0
    for _ in range(draws):
        rng.shuffle(order)
        total += sum(
            max(order[i : i + batch]) * len(order[i : i + batch])
            for i in range(0, len(order), batch)
        )
    return total / draws


# ---------------------------------------------------------------- the matmul rate


def measure_gflops(
    dtype: str, shape: Shape, tokens: Sequence[int] = (256, 1024, 2048), budget_s: float = 1.0
) -> dict[int, float]:
    """GFLOP/s of a (tokens × hidden) @ (hidden × intermediate) GEMM in `dtype`, on all torch
    threads: the best of repeated products within `budget_s` per size."""
    import torch

    dt = {"fp32": torch.float32, "bf16": torch.bfloat16}[dtype]
    w = torch.randn(shape.hidden, shape.intermediate, dtype=dt)
    out = {}
    for t in tokens:
        x = torch.randn(t, shape.hidden, dtype=dt)
        torch.matmul(x, w)  # warm
        best, start = math.inf, time.perf_counter()
        while time.perf_counter() - start < budget_s:
            t0 = time.perf_counter()
            torch.matmul(x, w)
            best = min(best, time.perf_counter() - t0)
        out[t] = 2.0 * t * shape.hidden * shape.intermediate / best / 1e9
    return out


# ---------------------------------------------------------------- counting the demo's work


def _precision(setting: str) -> str:
    from rmlib.generation.models import resolve_precision

    p = resolve_precision(setting)[0]
    return "fp32" if p == "fp32" else "bf16"  # nf4 and bf16 compute in bf16


def _table(run: Any, name: str) -> Any:
    return run.read_table(name) if run is not None and run.has_table(name) else None


def pair_prefix(fmt: Any, pair: Any) -> int:
    """Tokens a pair's reflection prompts share: everything before the first critique (the
    common token prefix of two prompts whose critiques differ from their first word)."""
    from rmlib.judge.prompts import format_judgment

    a = format_judgment("alpha beta", 1)
    b = format_judgment("gamma delta", 2)
    tok = fmt.tokenizer
    x = tok(fmt.refl(pair, a, b).text, add_special_tokens=False)["input_ids"]
    y = tok(fmt.refl(pair, b, a).text, add_special_tokens=False)["input_ids"]
    n = 0
    while n < min(len(x), len(y)) and x[n] == y[n]:
        n += 1
    return n


def refl_cap(fmt: Any, pair: Any, critique_cap: int) -> int:
    """A reflection prompt's tokens with both critiques at `critique_cap` tokens: the prompt
    with empty critiques plus the two, within the reflection budget."""
    empty = fmt.refl(pair, "", "").n_tokens
    return min(empty + 2 * critique_cap, fmt.budget.max_reflection_prompt_tokens)


@dataclass
class Lengths:
    """What a generation's length is taken to be where no run gives it. 'cap': every generation
    at its cap (an upper bound). 'typical': as long as the warm-up's own targets, what the
    warmed judge was taught to write (a Pref. judgment of the pair in warmup.analysis_style; a
    reflection's target of warmup.refl_targets; critiques are two such judgments, one each
    way), each within its cap: an estimate, not a bound."""

    fmt: Any
    mode: str = "cap"
    style: str = "evidence"
    refl_targets: str = "format"

    def _count(self, text: str) -> int:
        return len(self.fmt.tokenizer(text, add_special_tokens=False)["input_ids"]) + 1  # + end

    def _judgments(self, pair: Any) -> tuple[str, str]:
        from dataclasses import replace

        from rmlib.data.demo import reference_analysis
        from rmlib.judge.prompts import format_judgment

        wrong = replace(pair, label=3 - pair.label)
        return (
            format_judgment(reference_analysis(pair, self.style), pair.label),
            format_judgment(reference_analysis(wrong, self.style), wrong.label),
        )

    def pref_new(self, pair: Any, cap: int) -> int:
        return cap if self.mode == "cap" else min(cap, self._count(self._judgments(pair)[0]))

    def refl_prompt(self, pair: Any, critique_cap: int) -> int:
        if self.mode == "cap":
            return refl_cap(self.fmt, pair, critique_cap)
        return self.fmt.refl(pair, *self._judgments(pair)).n_tokens

    def refl_new(self, pair: Any, cap: int) -> int:
        if self.mode == "cap":
            return cap
        from rmlib.judge.prompts import format_judgment
        from rmlib.training.sft import refl_format_analysis, refl_reference_analysis

        if self.refl_targets == "format":
            analysis = refl_format_analysis(pair, 1)
        else:
            analysis = refl_reference_analysis(pair, 1, self.style)
        return min(cap, self._count(format_judgment(analysis, 1, "refl")))

    def how(self, cap: int) -> str:
        return f"<= {cap}" if self.mode == "cap" else f"typical, cap {cap}"


def warmup_work(cfg: Any, fmt: Any, shape: Shape) -> tuple[list[Work], str]:
    from rmlib.training.sft import warmup_dataset, warmup_pairs

    if not cfg.warmup.enabled:
        return [], "no warm-up"
    w = cfg.warmup
    data = warmup_dataset(fmt, warmup_pairs(w, seed=cfg.run.seed), w, seed=cfg.run.seed)
    tok = fmt.tokenizer
    seqs, scored = [], []
    for row in data:
        prompt = len(tok(row["prompt"])["input_ids"])
        seq = min(len(tok(row["prompt"] + row["completion"])["input_ids"]) + 1, w.max_length)
        seqs.append(seq)
        scored.append(max(seq - prompt, 0))
    epochs = w.epochs
    prec = _precision(w.precision)
    flops = epochs * sum(train_flops(shape, s, c) for s, c in zip(seqs, scored, strict=True))
    work = [
        Work(
            "02",
            f"warm-up: {len(seqs)} examples x {epochs:g} epochs (LoRA)",
            round(epochs * sum(seqs)),
            flops,
            prec,
        ),
    ]
    padded = epochs * padded_tokens(seqs, w.batch_size, seed=cfg.run.seed)
    note = (
        f"warm-up: {round(epochs * sum(scored))} of its tokens carry the loss; padded to each "
        f"random batch of {w.batch_size}, about {padded:,.0f} tokens are computed "
        f"({padded / (epochs * sum(seqs)) - 1:+.0%})"
    )
    return work, note


def rollout_work(cfg: Any, fmt: Any, shape: Shape, run: Any, lengths: Lengths) -> list[Work]:
    from rmlib.data.settings import load_split

    prec = _precision(cfg.model.precision)
    seed = cfg.data.subsample_seed if cfg.data.subsample_seed is not None else cfg.run.seed
    pairs = load_split(cfg.data.train, seed).pairs
    n, cap = cfg.rollouts.n_samples, cfg.rollouts.max_new_tokens
    df = _table(run, "rollouts_train")
    if df is None:
        prompts = [fmt.pref(p).n_tokens for p in pairs]
        new = [lengths.pref_new(p, cap) for p in pairs]
        shared, unshared, calls = stage1_items(prompts, n, new, greedy=False)
        how = f"{n} x {lengths.how(cap)}"
    else:
        per_key = df.groupby("key", sort=False)["prompt_tokens"].first()
        shared = [(int(p), 0) for p in per_key]
        unshared = [(int(p), 0) for p in df["prompt_tokens"]]
        calls = list(zip(df["prompt_tokens"].astype(int), df["n_tokens"].astype(int), strict=True))
        how = "the run's"
    return [
        prefill_work(shape, "02", f"rollouts: prefill, {len(shared)} prompts", shared, prec),
        _unshared(
            prefill_work(shape, "02", "rollouts: prefill, no prefix sharing", unshared, prec)
        ),
        decode_work(shape, "02", f"rollouts: decode ({how} per pair)", calls, prec),
    ]


def _unshared(w: Work) -> Work:
    return Work(w.notebook, w.part, w.tokens, w.flops, w.precision, in_total=False)


def grpo_work(cfg: Any, fmt: Any, shape: Shape, run: Any, lengths: Lengths) -> list[Work]:
    from rmlib.data.settings import load_split
    from rmlib.run.models import trained_models

    g = cfg.grpo
    gen_prec, train_prec = _precision(cfg.model.precision), _precision(cfg.model.train_precision)
    seed = cfg.data.subsample_seed if cfg.data.subsample_seed is not None else cfg.run.seed
    pairs = load_split(cfg.data.train, seed).pairs
    pref = [fmt.pref(p).n_tokens for p in pairs]
    refl = [lengths.refl_prompt(p, cfg.rollouts.max_new_tokens) for p in pairs]
    p_share, r_share = (float(x) for x in str(cfg.mix.ratio).split(":"))
    refl_frac = r_share / (p_share + r_share) if p_share + r_share else 0.0
    prompt = (1 - refl_frac) * sum(pref) / len(pref) + refl_frac * sum(refl) / len(refl)
    g_cap = g.max_completion_length
    pref_new = [lengths.pref_new(p, g_cap) for p in pairs]
    refl_new = [lengths.refl_new(p, g_cap) for p in pairs]
    completion = (1 - refl_frac) * sum(pref_new) / len(pairs) + refl_frac * sum(refl_new) / len(
        pairs
    )
    completions = g.per_device_train_batch_size * g.gradient_accumulation_steps * cfg.run.gpus
    steps = g.max_steps
    forwards = (1 if g.beta > 0 else 0) + (1 if g.use_vllm else 0)  # reference, old policy
    out = []
    for model in trained_models(cfg):
        steps_ = [(prompt, completion)] * steps
        how = f"prompt ~{prompt:.0f} (mix mean), completions {lengths.how(g_cap)}"
        progress = None if run is None else run.path / "training" / model / "progress.jsonl"
        if progress is not None and progress.exists():
            rows = [json.loads(x) for x in progress.read_text().splitlines() if x.strip()]
            got = grpo_steps(rows, completions, prompt)
            if got:
                steps_, how = got, "the run's per-step means"
        per_step = completions // g.num_generations
        shared = [(round(p), 0) for p, _ in steps_ for _ in range(per_step)]
        unshared = [(round(p), 0) for p, _ in steps_ for _ in range(completions)]
        calls = [(round(p), round(c)) for p, c in steps_ for _ in range(completions)]
        seq = [(round(p + c), round(c)) for p, c in steps_ for _ in range(completions)]
        train = sum(train_flops(shape, s, c) for s, c in seq)
        extra = forwards * sum(forward_flops(shape, s, scored=c) for s, c in seq)
        tokens = sum(s for s, _ in seq)
        out += [
            prefill_work(shape, "03", f"{model}: generation prefill", shared, gen_prec),
            _unshared(
                prefill_work(shape, "03", f"{model}: prefill, no sharing", unshared, gen_prec)
            ),
            decode_work(shape, "03", f"{model}: decode ({how})", calls, gen_prec),
            Work("03", f"{model}: policy forward+backward (LoRA)", tokens, train, train_prec),
            Work(
                "03",
                f"{model}: reference / old-policy forwards (x{forwards})",
                forwards * tokens,
                extra,
                train_prec,
            ),
        ]
    return out


def eval_work(cfg: Any, fmt: Any, shape: Shape, run: Any, lengths: Lengths) -> list[Work]:
    import pandas as pd

    from rmlib.data.settings import load_split
    from rmlib.reflect.method import judged_orders

    infer = cfg.inference
    prec = _precision(cfg.model.precision)
    seed = cfg.data.subsample_seed if cfg.data.subsample_seed is not None else cfg.run.seed
    pairs = [p for spec in cfg.data.eval for p in load_split(spec, seed).pairs]
    judged = judged_orders(pairs, infer)
    by_key = {p.key: p for p in judged}
    prefix: dict[str, int] = {}  # each reflected pair's shared tokens, counted once
    n = infer.n_samples
    out = []
    for model in cfg.eval.models:
        ro, gr, rf = (_table(run, f"{t}_{model}") for t in ("rollouts", "greedy", "reflections"))
        if ro is None:
            prompts = [fmt.pref(p).n_tokens for p in judged]
            new = [lengths.pref_new(p, infer.max_new_tokens) for p in judged]
            shared, unshared, calls1 = stage1_items(prompts, n, new, greedy=infer.run_greedy)
            how1 = f"{n}+1 x {lengths.how(infer.max_new_tokens)}"
            cap2 = infer.reflection_max_new_tokens
            planned = [
                (p, lengths.refl_prompt(p, infer.max_new_tokens), lengths.refl_new(p, cap2))
                for p in judged
                for _ in range((n - 1) * (2 if infer.random_anchor_on(p.source) else 1))
            ]
            refl_calls = [(p.key, t) for p, t, _ in planned]
            calls2 = [(t, m) for _, t, m in planned]
            how2 = lengths.how(cap2)
        else:
            both = ro if gr is None else pd.concat([ro, gr])
            per_key = both.groupby("key", sort=False)["prompt_tokens"].first()
            shared = [(int(p), 0) for p in per_key]
            unshared = [(int(p), 0) for p in both["prompt_tokens"]]
            calls1 = list(
                zip(both["prompt_tokens"].astype(int), both["n_tokens"].astype(int), strict=True)
            )
            how1 = "the run's"
            if rf is None:
                rf = pd.DataFrame({"key": [], "prompt_tokens": [], "n_tokens": []})
            refl_calls = list(zip(rf["key"], rf["prompt_tokens"].astype(int), strict=True))
            calls2 = list(
                zip(rf["prompt_tokens"].astype(int), rf["n_tokens"].astype(int), strict=True)
            )
            how2 = "the run's"
        keys = {k: 0 for k, _ in refl_calls}
        for k, _ in refl_calls:
            if k not in prefix:
                prefix[k] = pair_prefix(fmt, by_key[k]) if k in by_key else 0
        pre = {k: min(prefix[k], t) for k, t in refl_calls}
        out += [
            prefill_work(
                shape, "04", f"{model}: stage 1 prefill, {len(shared)} prompts", shared, prec
            ),
            _unshared(
                prefill_work(shape, "04", f"{model}: stage 1 prefill, no sharing", unshared, prec)
            ),
            decode_work(shape, "04", f"{model}: stage 1 decode ({how1})", calls1, prec),
            prefill_work(
                shape,
                "04",
                f"{model}: stage 2 prefill, {len(refl_calls)} calls, pair part shared",
                shared_prefill(keys, refl_calls, pre),
                prec,
            ),
            _unshared(
                prefill_work(
                    shape,
                    "04",
                    f"{model}: stage 2 prefill, no sharing",
                    [(t, 0) for _, t in refl_calls],
                    prec,
                )
            ),
            decode_work(shape, "04", f"{model}: stage 2 decode ({how2})", calls2, prec),
        ]
    return out


# ---------------------------------------------------------------- the command


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--params", help="params file (default params/demo.yaml, or the run's)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--run", help="a run folder: its generated token counts replace the caps")
    p.add_argument(
        "--typical",
        action="store_true",
        help="without a run: generations as long as the warm-up's targets, not at their caps",
    )
    p.add_argument("--measure", action="store_true", help="time fp32 and bf16 GEMMs here")
    p.add_argument("--gflops", help="the matmul rate: fp32=X,bf16=Y or one number for both")
    p.add_argument("--measured-s", help="measured notebook times, e.g. 02=1079,03=443,04=2203")
    p.add_argument("--output", help="write the tables as JSON here too")
    return p.parse_args(argv)


def rates_of(args: argparse.Namespace, shape: Shape) -> dict[str, float]:
    """The GFLOP/s of each precision: measured (`--measure`) or given (`--gflops`)."""
    if args.measure:
        import torch

        rates = {}
        for dtype in ("fp32", "bf16"):
            by_size = measure_gflops(dtype, shape)
            sizes = ", ".join(f"{t}: {g:.0f}" for t, g in by_size.items())
            print(f"GEMM {dtype} ({torch.get_num_threads()} threads), GFLOP/s by tokens: {sizes}")
            rates[dtype] = max(by_size.values())
        return rates
    given = parse_pairs(args.gflops, default_key="all")
    if "all" in given:
        given = {"fp32": given["all"], "bf16": given["all"], **given}
        given.pop("all")
    if set(given) != {"fp32", "bf16"}:
        raise SystemExit("give --measure, or --gflops fp32=X,bf16=Y (or one number for both)")
    return given


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    import pandas as pd

    from rmlib.cli import _set_option
    from rmlib.generation.models import load_tokenizer, resolve_model
    from rmlib.judge.prompts import PromptFormat
    from rmlib.run.config import load_config
    from rmlib.run.folder import RunFolder

    run = RunFolder(Path(args.run)) if args.run else None
    params = args.params or (str(run.params_file) if run else "params/demo.yaml")
    cfg = load_config(params, dict(_set_option(s) for s in args.set))
    path = resolve_model(cfg.model.backbone)
    shape = Shape.of(json.loads((Path(path) / "config.json").read_text()))
    tokenizer = load_tokenizer(path, trust_remote_code=cfg.model.trust_remote_code)
    fmt = PromptFormat.of(tokenizer, cfg)
    lengths = Lengths(
        fmt,
        "typical" if args.typical else "cap",
        cfg.warmup.analysis_style,
        cfg.warmup.refl_targets,
    )
    rates = rates_of(args, shape)
    print(
        f"{cfg.model.backbone}: {shape.body_params / 1e6:.1f} M parameters outside the "
        f"embedding, LM head {shape.head_params / 1e6:.1f} M; rates (GFLOP/s): "
        + ", ".join(f"{k} {v:.0f}" for k, v in rates.items())
        + f"; token counts: {'the run ' + args.run if run else lengths.mode}"
    )
    warm, note = warmup_work(cfg, fmt, shape)
    books = {
        "02": warm + rollout_work(cfg, fmt, shape, run, lengths),
        "03": grpo_work(cfg, fmt, shape, run, lengths),
        "04": eval_work(cfg, fmt, shape, run, lengths),
    }
    measured = parse_pairs(args.measured_s)
    result: dict[str, Any] = {"rates_gflops": rates, "params": params, "run": args.run}
    for book in sorted(set(books) | {k.partition("/")[0] for k in measured}):
        rows = table(books.get(book, []), rates, measured.get(book))
        result[book] = rows
        print(f"\n{book}" + ("" if book in books else ": no model compute counted"))
        print(pd.DataFrame(rows).to_string(index=False, na_rep=""))
        if book == "02" and note:
            print(note)
        for key, value in measured.items():  # '04/base=870': one model's share of a notebook
            nb, _, model = key.partition("/")
            if nb == book and model:
                floor = subtotal(books.get(book, []), rates, model)
                ratio = f"{value / floor:.1f}" if floor else "n/a"
                print(f"{key}: floor {floor:.1f} s, measured {value:g} s, measured/floor {ratio}")
                result[key] = {"floor_s": round(floor, 1), "measured_s": value}
    if args.output:
        Path(args.output).write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    from rmlib.cli import run_script

    sys.exit(run_script(main))
