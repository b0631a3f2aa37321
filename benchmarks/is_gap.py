"""The QLoRA learner / sampler gap that TRL's importance sampling must cover, measured on CPU with
real weights: how far the NF4 policy's log-probs of vLLM's sampled tokens are from vLLM's own,
and what each of TRL 1.16's `vllm_importance_sampling_mode`s makes of that gap.

What the Qwen3-4B profiles train (grpo.use_vllm with an nf4 base, rmlib.training.colocate): the
learner is the NF4 base (bitsandbytes) with a LoRA adapter; the sampler is vLLM on the same
checkpoint unquantized, serving the same adapter by LoRARequest. Here: the embedded SmolLM2-135M
(`embedded:smollm2-135m`, real weights; it stands in for Qwen3-4B and may not show its gap), one
LoRA adapter of the project's recipe (`lora_config`, every linear projection) with its B weights
drawn at random (a trained adapter is not zero; seeded), judgment prompts of the demo pairs, and
completions forced to each length (128, 512, 1,024 tokens: `min_tokens` = `max_tokens`), sampled
at temperature 1 with raw log-probs as TRL's colocated engine returns them.

For each completion, per token: d = log p_learner - log p_sampler (TRL's `old_per_token_logps -
sampling_per_token_logps`). TRL's ratio is exp(d) per token (`token_*`) or exp(sum d) per
sequence (`sequence_*`), then truncated to [clip_min, clip_max] or masked (set to 0) outside it;
its defaults are sequence_mask, clip_max 3.0, no clip_min. Printed per length: the gap's mean and
spread, the sequence ratio's quantiles, and the share of tokens or sequences each mode clips or
zeroes, with --clip-max (default TRL's 3.0) and --clip-min (default none).

    python benchmarks/is_gap.py --n 16 --lengths 128,512,1024 [--output is_gap.json]
"""

from __future__ import annotations

import argparse
import json
import math
import tempfile
import time
from pathlib import Path
from typing import Any


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--n", type=int, default=16, help="completions per length (default 16)")
    p.add_argument("--lengths", default="128,512,1024", help="completion lengths in tokens")
    p.add_argument("--lora-r", type=int, default=16)
    p.add_argument("--lora-b-std", type=float, default=0.02, help="the adapter's B weights' std")
    p.add_argument("--clip-max", type=float, default=3.0, help="TRL's default C_max")
    p.add_argument("--clip-min", type=float, default=None, help="TRL's default: none")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--output", help="write the results as JSON here too")
    return p.parse_args(argv)


def make_adapter(base: str, out: Path, r: int, b_std: float, seed: int) -> Path:
    """The project's LoRA recipe on `base`, its B weights drawn from N(0, b_std) (seeded)."""
    import torch
    from peft import get_peft_model

    from rmlib.generation.models import load_backbone
    from rmlib.training.grpo_config import GRPOSettings, lora_config

    model, _ = load_backbone(base, precision="fp32")
    settings = GRPOSettings(lora_r=r, lora_alpha=2 * r)
    peft = get_peft_model(model, lora_config(settings))
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in peft.named_parameters():
            if "lora_B" in name:
                param.copy_(torch.randn(param.shape, generator=gen) * b_std)
    peft.save_pretrained(str(out))
    return out


def prompts(tokenizer: Any, n: int, seed: int) -> list[list[int]]:
    """Judgment (Pref.) prompts of n demo pairs, as token ids (the chat template applied)."""
    from rmlib.data import load
    from rmlib.judge.prompts import PromptFormat

    pairs = load("demo", split="eval", seed=seed, n=n).pairs[:n]
    fmt = PromptFormat(tokenizer)
    return [tokenizer(fmt.pref(p).text, add_special_tokens=False)["input_ids"] for p in pairs]


def sample(path: str, adapter: Path, ids: list[list[int]], length: int, seed: int) -> list:
    """(completion ids, their raw log-probs) from vLLM on the unquantized checkpoint + LoRA."""
    from vllm import SamplingParams, TokensPrompt

    from rmlib.generation.vllm import EngineSettings, _lora_request, engine

    longest = max(map(len, ids)) + length
    settings = EngineSettings(
        model=path,
        dtype="float32",  # the nf4 base's CPU compute dtype: the colocated engine's on CPU
        max_model_len=longest,
        enable_lora=True,
        max_lora_rank=16,
        enforce_eager=True,
        max_num_batched_tokens=longest,
    )
    llm = engine(settings)
    params = [
        SamplingParams(
            temperature=1.0, max_tokens=length, min_tokens=length, logprobs=0, seed=seed + i
        )
        for i in range(len(ids))
    ]
    outs = llm.generate(
        [TokensPrompt(prompt_token_ids=p) for p in ids],
        params,
        lora_request=_lora_request(str(adapter)),
        use_tqdm=False,
    )
    done = []
    for out in outs:
        c = out.outputs[0]
        logprobs = [lp[t].logprob for t, lp in zip(c.token_ids, c.logprobs, strict=True)]
        done.append((list(c.token_ids), logprobs))
    return done


def learner_logprobs(model: Any, prompt: list[int], completion: list[int]) -> list[float]:
    """The NF4 policy's log-probs of `completion` after `prompt` (temperature 1, raw)."""
    import torch

    ids = torch.tensor([prompt + completion])
    with torch.no_grad():
        logits = model(ids).logits[0, len(prompt) - 1 : -1].float()
    logp = torch.log_softmax(logits, dim=-1)
    return logp.gather(1, torch.tensor(completion)[:, None])[:, 0].tolist()


def modes(gaps: list[list[float]], clip_max: float, clip_min: float | None) -> dict[str, Any]:
    """What each of TRL's modes does with these per-token gaps (d = learner - sampler)."""
    lo = -math.inf if clip_min is None else clip_min
    tokens = [math.exp(d) for g in gaps for d in g]
    seqs = [math.exp(min(sum(g), 700.0)) for g in gaps]  # exp of > 700 overflows a float

    def share(values: list[float], test: Any) -> float:
        return round(sum(map(test, values)) / len(values), 4)

    outside = lambda r: r > clip_max or r < lo  # noqa: E731 - the one test of all four modes
    return {
        "token_truncate": {"tokens_clipped": share(tokens, outside)},
        "token_mask": {"tokens_zeroed": share(tokens, outside)},
        "sequence_truncate": {"sequences_clipped": share(seqs, outside)},
        "sequence_mask": {"sequences_zeroed": share(seqs, outside)},
        "sequences_below_0.5": share(seqs, lambda r: r < 0.5),
    }


def summary(gaps: list[list[float]], args: argparse.Namespace) -> dict[str, Any]:
    flat = [d for g in gaps for d in g]
    mean = sum(flat) / len(flat)
    return {
        "completions": len(gaps),
        "token_gap_mean": round(mean, 5),
        "token_gap_sd": round(math.sqrt(sum((d - mean) ** 2 for d in flat) / len(flat)), 5),
        "token_gap_abs_mean": round(sum(map(abs, flat)) / len(flat), 5),
        "sequence_log_ratio": quantiles([sum(g) for g in gaps]),
        **modes(gaps, args.clip_max, args.clip_min),
    }


def quantiles(values: list[float]) -> dict[str, float]:
    s = sorted(values)
    pick = lambda q: s[min(len(s) - 1, int(q * len(s)))]  # noqa: E731
    return {f"p{int(q * 100)}": round(pick(q), 4) for q in (0.05, 0.25, 0.5, 0.75, 0.95)}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    import torch

    torch.set_num_threads(args.threads)
    from rmlib.generation import vllm as rv
    from rmlib.generation.models import SMOLLM2, load_backbone, load_tokenizer, resolve_model

    path = resolve_model(SMOLLM2)
    tokenizer = load_tokenizer(SMOLLM2)
    results: dict[str, Any] = {"model": SMOLLM2, "clip_max": args.clip_max, "lengths": {}}
    with tempfile.TemporaryDirectory() as tmp:
        adapter = make_adapter(SMOLLM2, Path(tmp) / "adapter", args.lora_r, args.lora_b_std,
                               args.seed)  # fmt: skip
        ids = prompts(tokenizer, args.n, args.seed)
        samples = {}
        for length in (int(x) for x in args.lengths.split(",")):
            t0 = time.time()
            samples[length] = sample(path, adapter, ids, length, args.seed)
            print(f"sampled {len(ids)} x {length} tokens in {time.time() - t0:.0f} s", flush=True)
        rv.shutdown()
        # nf4: the QLoRA learner; fp32: the control (the same weights as the sampler's, so its
        # gap is the engines' numerical floor, and any gap above it is the quantization's)
        for precision in ("fp32", "nf4"):
            learner, _ = load_backbone(SMOLLM2, precision=precision, adapter=str(adapter))
            for length, done in samples.items():
                t0 = time.time()
                gaps = []
                for prompt, (completion, sampled) in zip(ids, done, strict=True):
                    mine = learner_logprobs(learner, prompt, completion)
                    gaps.append([a - b for a, b in zip(mine, sampled, strict=True)])
                results["lengths"].setdefault(length, {})[precision] = summary(gaps, args)
                print(f"{precision} {length}: learner pass {time.time() - t0:.0f} s", flush=True)
            del learner
    print(json.dumps(results, indent=2))
    if args.output:
        Path(args.output).write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    from rmlib.cli import run_script

    raise SystemExit(run_script(main))
