"""What TRL's importance-sampling correction did to a GRPO step: the share of sequences (and
tokens) whose weight it zeroed or clipped, the share it left below a faint weight, the share of
tokens weighted below 1 / clip_max (the low side TRL's `token_truncate` leaves unbounded without
a clip_min), and 03's one-line warning when any is high.

Why our own count: with `use_vllm`, TRL weighs each completion by exp(learner log-prob - sampler
log-prob) and zeroes (`*_mask`) or clips (`*_truncate`) the weights outside its bounds, but logs
only the ratio's min, mean and max (`sampling/importance_sampling_ratio/*`). A step in which most
sequences were zeroed, or weighed exp(-45) inside the bounds, trains on little and shows
nothing; the shares do.
"""

from __future__ import annotations

import math
from typing import Any

# TRL's own metrics (logged by GRPOTrainer when use_vllm and the correction is on), then ours
IS_RATIO_KEYS: tuple[str, ...] = (
    "sampling/importance_sampling_ratio/min",
    "sampling/importance_sampling_ratio/mean",
    "sampling/importance_sampling_ratio/max",
)
LOGP_DIFF_KEYS: tuple[str, ...] = (
    "sampling/sampling_logp_difference/mean",
    "sampling/sampling_logp_difference/max",
)
CUT_SEQUENCES = "sampling/is_cut_sequences"
FAINT_SEQUENCES = "sampling/is_faint_sequences"
CUT_TOKENS = "sampling/is_cut_tokens"
LOW_TOKENS = "sampling/is_low_tokens"
IS_KEYS: tuple[str, ...] = (
    *IS_RATIO_KEYS,
    *LOGP_DIFF_KEYS,
    CUT_SEQUENCES,
    FAINT_SEQUENCES,
    CUT_TOKENS,
    LOW_TOKENS,
)
MODES = ("token_truncate", "token_mask", "sequence_truncate", "sequence_mask")


def cut_counts(
    learner_logps: Any,
    sampler_logps: Any,
    mask: Any,
    *,
    mode: str,
    clip_min: float | None,
    clip_max: float | None,
    faint: float,
) -> Any:
    """[sequences cut, sequences faint, sequences, tokens cut, tokens, tokens low] of one batch,
    as a float tensor (to be summed over processes).

    The weights are TRL 1.16's (`_generate_and_score_completions`): the ratio is exp of the
    masked per-token log-prob difference (a NaN sampler log-prob counts as no difference),
    summed over the sequence in the `sequence_*` modes; a ratio outside [clip_min, clip_max]
    (None = unbounded) is cut: zeroed by `*_mask`, clipped to the bound by `*_truncate`. A
    sequence is cut when its own weight is (`sequence_*`) or any of its tokens' is (`token_*`),
    and faint when its weight (the mean of its tokens' in the `token_*` modes) is below `faint`:
    it then barely trains, cut or not (a sequence ratio of exp(-45) is inside TRL's bounds).
    A token is low when the weight it trains with (its own in the `token_*` modes, its
    sequence's in the `sequence_*` modes; zeroed ones included) is below `low_bound`: the low
    side of the ratio, which "cut" misses where there is no clip_min (`token_truncate`'s default).
    """
    import torch

    if mode not in MODES:
        raise ValueError(f"unknown vllm_importance_sampling_mode {mode!r}")
    valid = mask.bool()
    diff = torch.nan_to_num((learner_logps - sampler_logps) * mask, nan=0.0)
    lo = -math.inf if clip_min is None else clip_min
    hi = math.inf if clip_max is None else clip_max
    ratio = torch.exp(diff.sum(dim=-1) if mode.startswith("sequence") else diff)
    cut = (ratio < lo) | (ratio > hi)
    weight = ratio.masked_fill(cut, 0.0) if mode.endswith("mask") else ratio.clamp(lo, hi)
    bound = low_bound(clip_max, faint)
    if mode.startswith("sequence"):
        cut_sequences, cut_tokens = cut, cut[:, None] & valid
        low_tokens = (weight < bound)[:, None] & valid
    else:
        low_tokens = (weight < bound) & valid
        cut_tokens = cut & valid
        cut_sequences = cut_tokens.any(dim=-1)
        tokens = valid.sum(dim=-1)
        # a sequence without tokens keeps weight 1: nothing of it is down-weighted
        weight = torch.where(tokens > 0, (weight * valid).sum(dim=-1) / tokens.clamp(min=1), 1.0)
    counts = (
        cut_sequences.sum(),
        (weight < faint).sum(),
        len(weight),
        cut_tokens.sum(),
        valid.sum(),
        low_tokens.sum(),
    )
    return torch.tensor([float(c) for c in counts], device=mask.device)


def low_bound(clip_max: float | None, faint: float) -> float:
    """The weight below which a token counts as low: 1 / clip_max, the mirror of TRL's upper
    bound (3 by default: below 1/3); without an upper bound, the faint weight
    (grpo.importance_sampling_faint_weight)."""
    return 1.0 / clip_max if clip_max else faint


def cut_shares(counts: Any) -> dict[str, float]:
    """The progress table's shares from `cut_counts` (summed over processes); NaN where there
    was nothing to count."""
    cut_seq, faint_seq, seqs, cut_tok, toks, low_tok = (float(c) for c in counts)
    return {
        CUT_SEQUENCES: cut_seq / seqs if seqs else math.nan,
        FAINT_SEQUENCES: faint_seq / seqs if seqs else math.nan,
        CUT_TOKENS: cut_tok / toks if toks else math.nan,
        LOW_TOKENS: low_tok / toks if toks else math.nan,
    }


def cut_warning(log: Any, share: float, mode: str = "") -> str | None:
    """One line when any trained variant's mean share of cut or faint sequences, or of low
    tokens, exceeds `share` (grpo.importance_sampling_warn_share), naming the variant, the
    shares and what to change; None when none does or nothing was logged (use_vllm off)."""
    if log is None:
        return None
    kinds = (FAINT_SEQUENCES, CUT_SEQUENCES, LOW_TOKENS)
    keys = [k for k in kinds if k in log and log[k].notna().any()]
    if not keys:
        return None
    groups = log.groupby("variant") if "variant" in log else [("model", log)]
    means = {str(v): {k: float(g[k].mean()) for k in keys} for v, g in groups}
    over = {v: m for v, m in means.items() if max(m.values()) > share}
    if not over:
        return None
    mode = mode or "TRL's default"
    shares = "; ".join(
        f"{v}: {100 * m.get(FAINT_SEQUENCES, math.nan):.0f} % faint, "
        f"{100 * m.get(CUT_SEQUENCES, math.nan):.0f} % cut"
        + (f", {100 * m[LOW_TOKENS]:.0f} % of tokens low" if LOW_TOKENS in m else "")
        for v, m in over.items()
    )
    return (
        f"⚠ importance sampling zeroed, clipped or all but silenced more than {100 * share:.0f} % "
        f"of a step's sequences or tokens on average ({shares}; low: weighted below 1 / "
        f"clip_max; mode {mode}): those steps train on little. "
        "Use grpo.trl.vllm_importance_sampling_mode: token_truncate, or raise "
        "grpo.trl.vllm_importance_sampling_clip_max; a bf16 training base "
        "(model.train_precision) narrows the learner/sampler gap."
    )
