"""The share of sequences TRL's importance sampling cut (rmlib.training.importance), worked out
by hand; the trainer's counts against TRL's own weights are checked in test_training_colocate."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest
import torch

from rmlib.run.config import load_config
from rmlib.training.importance import (
    CUT_SEQUENCES,
    CUT_TOKENS,
    FAINT_SEQUENCES,
    LOW_TOKENS,
    cut_counts,
    cut_shares,
    cut_warning,
    low_bound,
)
from rmlib.training.progress import PROGRESS_KEYS

NAN = math.nan

# learner - sampler per token: sequence 0 sums to 2.0 (ratio e^2 = 7.4), sequence 1 to 0.5
# (1.65), and one token of 1.5 (4.5); the last position of sequence 1 is padding (NaN sampler)
LEARNER = torch.tensor([[0.5, 0.5, 1.0], [1.5, -1.0, 0.0]])
SAMPLER = torch.tensor([[0.0, 0.0, 0.0], [0.0, 0.0, NAN]])
MASK = torch.tensor([[1, 1, 1], [1, 1, 0]])


def counts(
    mode: str, clip_min: float | None = None, clip_max: float | None = 3.0, faint: float = 0.1
) -> list[float]:
    """[cut sequences, faint sequences, sequences, cut tokens, tokens] (low tokens: `low`)"""
    out = cut_counts(
        LEARNER, SAMPLER, MASK, mode=mode, clip_min=clip_min, clip_max=clip_max, faint=faint
    )
    return out.tolist()[:5]


def low(mode: str, clip_min: float | None = None, clip_max: float | None = 3.0) -> float:
    """Tokens weighted below 1 / clip_max (the faint weight 0.1 without clip_max)."""
    out = cut_counts(
        LEARNER, SAMPLER, MASK, mode=mode, clip_min=clip_min, clip_max=clip_max, faint=0.1
    )
    return out.tolist()[5]


def test_low_side_weights_are_counted():
    """token_truncate without a clip_min leaves a token's ratio far below 1 unbounded: it
    counts as low below 1 / clip_max (1/3), while "cut" sees only the upper side."""
    learner = torch.tensor([[-3.0, 0.0, 0.0], [-0.5, -2.0, 0.0]])
    sampler = torch.zeros(2, 3)
    mask = torch.tensor([[1, 1, 1], [1, 1, 0]])
    out = cut_counts(
        learner, sampler, mask, mode="token_truncate", clip_min=None, clip_max=3.0, faint=0.1
    ).tolist()
    assert out[3] == 0 and out[5] == 2  # nothing cut; e^-3 and e^-2 below 1/3, e^-0.5 not
    assert cut_shares(torch.tensor(out))[LOW_TOKENS] == 2 / 5
    # a floor lifts them to clip_min: no longer low when clip_min >= 1/3
    assert (
        cut_counts(
            learner, sampler, mask, mode="token_truncate", clip_min=0.5, clip_max=3.0, faint=0.1
        ).tolist()[5]
        == 0
    )
    # masked, the zeroed tokens weigh 0: low (e^0.5, e^0.5, e^1, e^1.5 above 1.2), and e^-1 =
    # 0.37 is below 1 / 1.2; the sequence modes weigh every token by its sequence's
    assert low("token_mask", clip_max=1.2) == 5
    assert low("sequence_mask") == 3  # sequence 0 (e^2 > 3) zeroed, with its 3 tokens
    assert low("sequence_truncate", clip_max=None) == 0
    assert low_bound(3.0, 0.1) == pytest.approx(1 / 3) and low_bound(None, 0.1) == 0.1


@pytest.mark.parametrize("mode", ["sequence_mask", "sequence_truncate"])
def test_a_sequence_mode_cuts_the_sequences_whose_summed_ratio_is_out_of_bounds(mode):
    # sequence 0 (e^2) is cut, with its 3 tokens: zeroed (faint) by a mask, clipped to 3 by
    # truncation (not faint)
    masked = mode == "sequence_mask"
    assert counts(mode) == [1, int(masked), 2, 3, 5]
    # a floor at 2.0 cuts sequence 1 (e^0.5) as well
    assert counts(mode, clip_min=2.0) == [2, 2 * int(masked), 2, 5, 5]
    assert counts(mode, clip_max=None) == [0, 0, 2, 0, 5]
    # weights inside the bounds can still be faint: e^0.5 = 1.65 is below 2
    assert counts(mode, clip_max=None, faint=2.0) == [0, 1, 2, 0, 5]


@pytest.mark.parametrize("mode", ["token_mask", "token_truncate"])
def test_a_token_mode_cuts_tokens_and_counts_their_sequences(mode):
    # only the 1.5 token (e^1.5 = 4.5) is above 3.0: one token, in sequence 1
    assert counts(mode) == [1, 0, 2, 1, 5]
    # a floor at 0.5 also cuts the -1.0 token (e^-1 = 0.37); padding never counts. Masked,
    # both of sequence 1's tokens weigh 0 (faint); truncated, (3 + 0.5) / 2
    assert counts(mode, clip_min=0.5) == [1, int(mode == "token_mask"), 2, 2, 5]
    # e^0.5, e^0.5, e^1, e^1.5 cut: masked, sequence 0 keeps no weight at all
    assert counts(mode, clip_max=1.2) == [2, int(mode == "token_mask"), 2, 4, 5]
    # faint by the mean of a sequence's token weights: sequence 1 masked is (0 + 0.37) / 2
    # = 0.18, truncated (3 + 0.37) / 2 = 1.68; sequence 0 (1.65 + 1.65 + 2.72) / 3 = 2.0
    assert counts(mode, faint=1.0)[1] == int(mode == "token_mask")
    assert counts(mode, faint=2.1)[1] == 2


def test_shares_and_an_unknown_mode():
    assert cut_shares(torch.tensor([1.0, 2.0, 4.0, 2.0, 40.0, 10.0])) == {
        CUT_SEQUENCES: 0.25,
        FAINT_SEQUENCES: 0.5,
        CUT_TOKENS: 0.05,
        LOW_TOKENS: 0.25,
    }
    assert all(math.isnan(v) for v in cut_shares(torch.zeros(6)).values())
    with pytest.raises(ValueError, match="unknown vllm_importance_sampling_mode 'sequence'"):
        counts("sequence")


def test_the_progress_table_keeps_trl_metrics_and_the_shares():
    for key in (
        "sampling/importance_sampling_ratio/mean",
        "sampling/sampling_logp_difference/max",
        CUT_SEQUENCES,
        FAINT_SEQUENCES,
        CUT_TOKENS,
        LOW_TOKENS,
    ):
        assert key in PROGRESS_KEYS


def test_the_warning_is_one_line_naming_the_variant_the_share_and_the_fix():
    log = pd.DataFrame(
        {
            "step": [1, 2, 1, 2],
            "variant": ["unified", "unified", "rft", "rft"],
            CUT_SEQUENCES: [0.9, 0.7, 0.0, 0.1],
            FAINT_SEQUENCES: [1.0, 1.0, 0.0, 0.1],
        }
    )
    line = cut_warning(log, 0.2, "sequence_mask")
    assert line is not None and "\n" not in line
    assert "unified: 100 % faint, 80 % cut" in line and "rft" not in line
    assert "more than 20 %" in line
    assert "mode sequence_mask" in line and "token_truncate" in line
    assert "TRL's default" in cut_warning(log, 0.2)
    assert cut_warning(log, 1.0) is None
    # faint alone (every sequence inside the bounds, each weighing ~0) is warned of too
    assert "unified" in cut_warning(log.drop(columns=[CUT_SEQUENCES]), 0.85)
    # low tokens alone (token_truncate without a floor: nothing cut, nothing faint)
    quiet = log.assign(**{CUT_SEQUENCES: 0.0, FAINT_SEQUENCES: 0.0, LOW_TOKENS: [0.6, 0.4, 0, 0]})
    line = cut_warning(quiet, 0.2, "token_truncate")
    assert "unified: 0 % faint, 0 % cut, 50 % of tokens low" in line and "rft" not in line
    assert "below 1 / clip_max" in line
    # use_vllm off: nothing logged, nothing to say
    assert cut_warning(log.assign(**{CUT_SEQUENCES: NAN, FAINT_SEQUENCES: NAN}), 0.2) is None
    assert cut_warning(log[["step", "variant"]], 0.2) is None


PROFILES = sorted((Path(__file__).parent.parent / "params").glob("*.yaml"))


@pytest.mark.parametrize("profile", PROFILES, ids=lambda p: p.stem)
def test_every_qlora_profile_weighs_tokens_not_sequences(profile):
    """An NF4 learner beside an unquantized vLLM sampler: per sequence, every long completion
    weighs about zero (README's measured table), so each such profile picks a token mode."""
    cfg = load_config(profile)
    if cfg.model.train_precision == "nf4" and cfg.grpo.use_vllm:
        assert cfg.grpo.trl.get("vllm_importance_sampling_mode", "").startswith("token_")
