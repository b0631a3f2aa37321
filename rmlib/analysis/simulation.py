"""Notebook 06's map of when reflection pays: a small model of the method, not a result.

Judges are simulated from a few parameters (`JudgeModel`): each of N stage-1 samples parses with
`parse_rate` and is right with `accuracy`; its confidence is normal, shifted up for right samples
so that a right sample outranks a wrong one with probability `confidence_auc`; the anchor is the
most confident parsed sample; each stage-2 call of another parsed sample against the anchor
makes it a winner with a probability set by the case: anchor right and the other wrong, the
reflection keeps the anchor with `reflection_right`; anchor wrong and the other right, it
overrules with `reflection_wrong`; the two of the same verdict, the other wins with
`agree_win`; a call that does not parse is a call the anchor won (method.md §4), so these
rates count it as the vote does (and 06's reflection table too: `rmlib.reflect.prefers_correct`).
The greedy judgment is one more draw: it parses with `greedy_parse_rate` and is then right with
`greedy_accuracy`.

Within a pair, draws are correlated by two parameters (a real judge finds a hard pair hard for
every sample, and its greedy stage-2 calls re-judge the same pair):

- `sample_correlation` (rho_1): each pair draws its own accuracy from a Beta distribution with
  mean `accuracy` and intra-class correlation rho_1 (the beta-binomial model), and its samples
  are right with that probability: 0 is independent samples, 1 makes a pair's samples all right
  or all wrong;
- `call_correlation` (rho_2): with probability rho_2 a pair's stage-2 calls all read one shared
  uniform draw (a call wins when it falls below its case's rate), otherwise each call draws its
  own: 0 is independent calls, 1 makes the N-1 calls act as one (calls of the same case agree).

Either way two draws of a pair are right together (win together) more often than independence
predicts by rho x (what full correlation would add), which is how `within_pair_correlation`
measures both from a run. Confidences and the greedy judgment stay independent given these
parameters, which is one reason the model is a model.

The verdicts are then the run's own: each simulated pair becomes the registry's per-pair input
(`rmlib.reflect.registry.PairVotes`) and each method's vote is `registry.BY_NAME[m].vote` with
the run's `inference` settings (tie rule, seed). The votes read only the counts of each verdict
among the parsed samples and the winners, the anchor's and the first parsed sample's verdict and
the greedy verdict, so pairs with the same counts share one call (`canonical_votes` builds that
call's input; tests check it gives the raw pair's outcome). With a vote that draws per pair (the
'random' majority tie rule, 'random_winners') every pair gets its own call.

`reflection_map` sweeps confidence AUC x reflection accuracy at one stage-1 accuracy and N (every
cell with the same seed: common random numbers, so neighbouring cells differ by the parameters,
not by noise); `measured_parameters` reads the model's parameters off a run's tables;
`reflection_pays` puts both together for notebook 06 (metrics.json section `reflection_map`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from statistics import NormalDist
from typing import Any

import numpy as np
import pandas as pd

from rmlib import scoring
from rmlib.analysis.common import pooled_rate, records
from rmlib.reflect import registry
from rmlib.reflect.registry import PairVotes
from rmlib.reflect.settings import ReflectConfig
from rmlib.run.config import RunConfig
from rmlib.run.folder import RunFolder
from rmlib.run.models import evaluated_models, headline_model, stage1_model

# The methods the model computes (registry names): greedy, majority of N, the anchor alone, and
# ReflectRM. Any registered vote over these inputs can be added; 'random_anchor' cannot (the
# model draws no second anchor's calls).
SIM_METHODS: tuple[str, ...] = ("greedy", "majority", "anchor", "reflectrm")
# Simulated pairs per parameter set (a map cell): ReflectRM minus majority is a paired difference
# over the same pairs, so its standard error is a little under 1 point at 4,000 pairs
SIM_PAIRS = 4000
SIM_SEED = 0  # the default seed (reflection_pays uses the run's seed)
# The map's axes: confidence AUC (0.5 = confidence says nothing; below, the least confident
# samples are right more often) and reflection accuracy, in steps of 0.1
AUC_GRID: tuple[float, ...] = tuple(round(x, 2) for x in np.linspace(0.2, 0.9, 8))
REFLECTION_GRID: tuple[float, ...] = tuple(round(x, 2) for x in np.linspace(0.0, 1.0, 11))
# Methods whose vote draws from a per-pair random stream: pairs with equal counts still differ
_PER_PAIR_DRAWS = frozenset({"random_winners"})


@dataclass(frozen=True)
class JudgeModel:
    """A simulated judge (the module docstring says how each parameter enters).

    accuracy: a parsed stage-1 sample is right with this probability. confidence_auc: a right
    sample's confidence exceeds a wrong one's with this probability (within a pair).
    reflection_right: the anchor right and the other wrong, the reflection keeps the anchor.
    reflection_wrong: the anchor wrong and the other right, it overrules the anchor. n_samples:
    N. agree_win: an other sample of the anchor's verdict beats the anchor's critique.
    parse_rate: a sample's verdict parses. greedy_accuracy, greedy_parse_rate: the greedy
    judgment is right (given it parses), and parses (None: `accuracy`, `parse_rate`).
    sample_correlation, call_correlation: the within-pair correlation of the stage-1 samples'
    correctness and of the stage-2 calls' outcomes (0 independent, 1 one draw per pair).
    """

    accuracy: float
    confidence_auc: float = 0.5
    reflection_right: float = 0.5
    reflection_wrong: float = 0.5
    n_samples: int = 8
    agree_win: float = 0.5
    parse_rate: float = 1.0
    greedy_accuracy: float | None = None
    greedy_parse_rate: float | None = None
    sample_correlation: float = 0.0
    call_correlation: float = 0.0

    def __post_init__(self) -> None:
        names = ("accuracy", "reflection_right", "reflection_wrong", "agree_win")
        for name in (*names, "sample_correlation", "call_correlation"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"{name} must be in [0, 1], got {getattr(self, name)}")
        for name in ("greedy_accuracy", "greedy_parse_rate"):
            value = getattr(self, name)
            if value is not None and not 0.0 <= value <= 1.0:
                raise ValueError(f"{name} must be in [0, 1] or None, got {value}")
        if not 0.0 < self.parse_rate <= 1.0:
            raise ValueError(f"parse_rate must be in (0, 1], got {self.parse_rate}")
        if not 0.0 < self.confidence_auc < 1.0:
            raise ValueError(f"confidence_auc must be in (0, 1), got {self.confidence_auc}")
        if self.n_samples < 1:
            raise ValueError(f"n_samples must be at least 1, got {self.n_samples}")

    @property
    def confidence_shift(self) -> float:
        """The mean confidence of right samples above wrong ones, in standard deviations: two
        unit normals d apart are ordered right with probability Phi(d / sqrt 2) = the AUC."""
        return math.sqrt(2) * NormalDist().inv_cdf(self.confidence_auc)


def _pair_accuracy(
    accuracy: float, rho: float, n_pairs: int, rng: np.random.Generator
) -> np.ndarray:
    """Each pair's probability that a sample is right: Beta with mean `accuracy` and intra-class
    correlation `rho` (a + b = 1/rho - 1); at rho 0 (or a certain accuracy) every pair's is
    `accuracy`, at rho 1 it is 0 or 1."""
    if rho == 0 or accuracy in (0.0, 1.0):
        return np.full(n_pairs, accuracy)
    if rho == 1:
        return (rng.random(n_pairs) < accuracy).astype(float)
    total = 1.0 / rho - 1.0
    return rng.beta(accuracy * total, (1.0 - accuracy) * total, n_pairs)


def _draw(model: JudgeModel, n_pairs: int, seed: int) -> dict[str, np.ndarray]:
    """The simulated pairs as counts (COUNT_COLUMNS; every pair's label is 1: a right verdict
    is 1), with the raw draws they come from."""
    rng = np.random.default_rng(seed)
    # the per-pair latents come from their own stream, so at zero correlation the draws are
    # exactly those of independent samples and calls with the same seed
    latent = np.random.default_rng([seed, 1])
    n = model.n_samples
    parsed = rng.random((n_pairs, n)) < model.parse_rate
    p_right = _pair_accuracy(model.accuracy, model.sample_correlation, n_pairs, latent)
    right = rng.random((n_pairs, n)) < p_right[:, None]
    conf = rng.standard_normal((n_pairs, n)) + model.confidence_shift * right
    has = parsed.any(axis=1)
    # the most confident parsed sample (select_anchor's rule; ties have probability 0)
    anchor = np.argmax(np.where(parsed, conf, -np.inf), axis=1)
    rows = np.arange(n_pairs)
    anchor_right = right[rows, anchor] & has
    others = parsed & (np.arange(n)[None, :] != anchor[:, None]) & has[:, None]
    same = right == anchor_right[:, None]
    p_win = np.where(
        same,
        model.agree_win,
        np.where(anchor_right[:, None], 1.0 - model.reflection_right, model.reflection_wrong),
    )
    u = rng.random((n_pairs, n))
    one_draw = latent.random(n_pairs) < model.call_correlation
    u = np.where(one_draw[:, None], latent.random(n_pairs)[:, None], u)
    wins = others & (u < p_win)
    first = np.argmax(parsed, axis=1)
    g_parse = model.parse_rate if model.greedy_parse_rate is None else model.greedy_parse_rate
    g_parsed = rng.random(n_pairs) < g_parse
    g_acc = model.accuracy if model.greedy_accuracy is None else model.greedy_accuracy
    g_right = rng.random(n_pairs) < g_acc
    return {
        # the raw draws (tests compare the anchor with select_anchor's)
        "parsed": parsed,
        "right": right,
        "confidence": conf,
        "anchor_index": np.where(has, anchor, -1),
        "wins": wins,
        "n1": (parsed & right).sum(axis=1),
        "n2": (parsed & ~right).sum(axis=1),
        "first": np.where(has, np.where(right[rows, first], 1, 2), 0),
        "anchor": np.where(has, np.where(anchor_right, 1, 2), 0),
        "w1": (wins & right).sum(axis=1),
        "w2": (wins & ~right).sum(axis=1),
        "greedy": np.where(g_parsed, np.where(g_right, 1, 2), 0),
    }


COUNT_COLUMNS = ("n1", "n2", "first", "anchor", "w1", "w2", "greedy")


def canonical_votes(counts: Sequence[int], n_samples: int, key: str) -> PairVotes:
    """The registry's per-pair input for one pair given by its counts (COUNT_COLUMNS: parsed
    samples saying 1 and 2, the first parsed sample's and the anchor's verdict, winners saying 1
    and 2, the greedy verdict; 0 = none): the first parsed sample first, unparsed ones last."""
    n1, n2, first, anchor, w1, w2, greedy = (int(c) for c in counts)
    if n1 + n2 == 0:
        return PairVotes(key, "simulation", [None] * n_samples, None, greedy=greedy or None)
    rest = [1] * (n1 - (first == 1)) + [2] * (n2 - (first == 2))
    choices: list[int | None] = [first, *rest, *[None] * (n_samples - n1 - n2)]
    a = max(i for i, c in enumerate(choices) if c == anchor)
    ones = [i for i, c in enumerate(choices) if c == 1 and i != a][:w1]
    twos = [i for i, c in enumerate(choices) if c == 2 and i != a][:w2]
    return PairVotes(
        key,
        "simulation",
        choices,
        a,
        winners={"reflectrm": sorted(ones + twos)},
        greedy=greedy or None,
    )


def _verdicts(
    counts: np.ndarray,
    n_samples: int,
    cfg: ReflectConfig,
    methods: Sequence[str],
    tag: str,
    memo: dict[tuple[int, ...], tuple[int, ...]] | None = None,
) -> dict[str, np.ndarray]:
    """Each method's verdict per pair (0 = parse failure, -1 = not computed), by the registry's
    votes: one call per distinct count row (`memo` keeps them across calls with the same N,
    settings and methods), or per pair where a vote draws per pair."""
    per_pair = cfg.majority_tie_break == "random" or bool(_PER_PAIR_DRAWS & set(methods))
    if per_pair:
        uniq, inverse = counts, np.arange(len(counts))
    else:
        uniq, inverse = np.unique(counts, axis=0, return_inverse=True)
    memo = {} if memo is None else memo
    table = np.empty((len(uniq), len(methods)), dtype=int)
    for j, row in enumerate(uniq):
        counts_key = tuple(int(c) for c in row)
        known = None if per_pair else memo.get(counts_key)
        if known is None:
            name = f"{tag}:{j}" if per_pair else ":".join(map(str, counts_key))
            votes = canonical_votes(counts_key, n_samples, f"simulation:{name}")
            outcomes = [registry.BY_NAME[m].vote(votes, cfg) for m in methods]
            known = tuple(-1 if o is None else (o[0] or 0) for o in outcomes)
            if not per_pair:
                memo[counts_key] = known
        table[j] = known
    table = table[np.asarray(inverse).ravel()]
    return {m: table[:, k] for k, m in enumerate(methods)}


def simulate_pairs(
    model: JudgeModel,
    n_pairs: int = SIM_PAIRS,
    seed: int = SIM_SEED,
    cfg: ReflectConfig | None = None,
    methods: Sequence[str] = SIM_METHODS,
    memo: dict[tuple[int, ...], tuple[int, ...]] | None = None,
) -> pd.DataFrame:
    """One row per simulated pair: each method's verdict (1 right, 2 wrong, 0 parse failure;
    -1 where the run's settings switch the method off), whether any parsed sample and whether
    the anchor was right, and the pair's counts. cfg: the run's `inference` settings (default
    ReflectConfig()). memo: votes already cast, for calls with the same N, cfg and methods."""
    cfg = cfg or ReflectConfig()
    d = _draw(model, n_pairs, seed)
    counts = np.stack([d[c] for c in COUNT_COLUMNS], axis=1)
    df = pd.DataFrame(counts, columns=list(COUNT_COLUMNS))
    for m, v in _verdicts(counts, model.n_samples, cfg, methods, f"{seed}", memo).items():
        df[m] = v
    df["any_right"] = df["n1"] > 0
    df["anchor_right"] = df["anchor"] == 1
    return df


def simulated_accuracy(
    model: JudgeModel,
    n_pairs: int = SIM_PAIRS,
    seed: int = SIM_SEED,
    cfg: ReflectConfig | None = None,
    methods: Sequence[str] = SIM_METHODS,
    failure_credit: float = 0.0,
    memo: dict[tuple[int, ...], tuple[int, ...]] | None = None,
) -> dict[str, float]:
    """Each method's expected accuracy under the model (a parse failure scores
    `failure_credit`, as eval.failure_credit does; NaN for a method switched off)."""
    df = simulate_pairs(model, n_pairs, seed, cfg, methods, memo)
    out = {}
    for m in methods:
        v = df[m].to_numpy()
        out[m] = (
            math.nan if (v == -1).all() else float(np.where(v == 0, failure_credit, v == 1).mean())
        )
    return out


def reflection_map(
    accuracy: float,
    n_samples: int,
    *,
    reflection_right: float | None = None,
    auc_grid: Sequence[float] = AUC_GRID,
    reflection_grid: Sequence[float] = REFLECTION_GRID,
    base: JudgeModel | None = None,
    n_pairs: int = SIM_PAIRS,
    seed: int = SIM_SEED,
    cfg: ReflectConfig | None = None,
    failure_credit: float = 0.0,
) -> pd.DataFrame:
    """ReflectRM, majority, anchor and greedy accuracy over confidence AUC x reflection accuracy.

    One row per cell: `auc`, `reflection` (the y axis: the reflection's accuracy when the anchor
    is wrong, and when it is right too unless `reflection_right` fixes that), each method's
    accuracy and `gain` = ReflectRM minus majority. base: the other parameters (agree_win,
    parse_rate, greedy_accuracy; default JudgeModel's); every cell uses `seed`."""
    base = base or JudgeModel(accuracy=accuracy)
    memo: dict[tuple[int, ...], tuple[int, ...]] = {}  # one N, cfg and method list throughout
    rows = []
    for auc in auc_grid:
        for r in reflection_grid:
            model = replace(
                base,
                accuracy=accuracy,
                n_samples=n_samples,
                confidence_auc=float(auc),
                reflection_wrong=float(r),
                reflection_right=float(r if reflection_right is None else reflection_right),
            )
            acc = simulated_accuracy(
                model, n_pairs, seed, cfg, SIM_METHODS, failure_credit=failure_credit, memo=memo
            )
            rows.append(
                {"auc": float(auc), "reflection": float(r), **acc}
                | {"gain": acc["reflectrm"] - acc["majority"]}
            )
    return pd.DataFrame(rows)


def confidence_auc(rollouts: pd.DataFrame) -> tuple[float, int]:
    """Within-pair AUC of the confidence: over every (right, wrong) pair of parsed samples of the
    same judged pair and order, the share where the right one is more confident (ties half);
    NaN when no pair has both. Returns (AUC, comparisons)."""
    r = rollouts[rollouts["choice"].notna()]
    r = r[np.isfinite(r["confidence"].astype(float))]
    wins, total = 0.0, 0
    for _, g in r.groupby("key", sort=False):
        ok = g["correct"].astype(bool).to_numpy()
        c = g["confidence"].astype(float).to_numpy()
        right, wrong = c[ok], c[~ok]
        if len(right) and len(wrong):
            diff = right[:, None] - wrong[None, :]
            wins += float((diff > 0).sum() + 0.5 * (diff == 0).sum())
            total += diff.size
    return (wins / total if total else math.nan), total


def within_pair_correlation(
    groups: pd.Series, outcome: pd.Series, rate: pd.Series
) -> tuple[float, int]:
    """The within-pair correlation rho of binary draws, by the method of moments: over every two
    draws of the same group (pair), how much more often they agree than independence predicts,
    as a share of what full correlation would add.

    outcome: each draw's result (right, won); rate: its modelled probability (the case's rate).
    Two draws with rates p and q agree with probability pq + (1-p)(1-q) when independent and
    1 - |p - q| when they are one draw (both below one uniform), and the model's rho mixes the
    two, so rho = sum(agreed - independent) / sum(one draw - independent). With one rate p this
    is the beta-binomial intra-class correlation (the denominator is 2p(1-p) per two draws).
    Returns (rho, the number of two-draw comparisons); rho is NaN where no group has two draws
    that independence does not already fix (every rate 0 or 1). It can be below 0 (draws that
    disagree more than chance); the model clips it to [0, 1] (`judge_model_of`)."""
    frame = pd.DataFrame(
        {"g": groups.to_numpy(), "y": outcome.astype(float).to_numpy(),
         "p": rate.astype(float).to_numpy()}
    )  # fmt: skip
    frame["n"] = np.arange(len(frame))
    # every two draws of one group, once each (a self-join on the group)
    two = frame.merge(frame, on="g", suffixes=("_i", "_j"))
    two = two[two["n_i"] < two["n_j"]]
    p, q = two["p_i"].to_numpy(), two["p_j"].to_numpy()
    independent = p * q + (1 - p) * (1 - q)
    excess = float(((two["y_i"] == two["y_j"]).to_numpy() - independent).sum())
    room = float((1 - np.abs(p - q) - independent).sum())
    n_cmp = len(two)
    return (excess / room if room > 0 else math.nan), n_cmp


def _rate(x: pd.Series) -> float:
    return float(x.astype(float).mean()) if len(x) else math.nan


# the stage-2 cases by (anchor right, other right): the parameter whose rate of the other
# winning a call of that case is read off the run (reflection_right is 1 minus that rate)
_CASES = {
    (True, False): "reflection_right",
    (False, True): "reflection_wrong",
    (True, True): "agree_win",
    (False, False): "agree_win",
}


def parameters_from_tables(
    rollouts: pd.DataFrame,
    predictions: pd.DataFrame,
    reflections: pd.DataFrame | None,
    n_samples: int,
    model: str = "",
) -> dict[str, Any]:
    """The model's parameters from one model's tables (`measured_parameters` reads them off a
    run folder): stage-1 accuracy and parse rate of the samples, the within-pair confidence AUC
    and sample correlation (`within_pair_correlation` of parsed samples' correctness, each at
    the pooled accuracy), the greedy judgment's parse rate and accuracy, and from the real
    anchor's stage-2 calls the rates at which the other sample won, by case, and the call
    correlation (`within_pair_correlation` of `other_wins`, each call at its case's rate). A
    failed call counts as the vote counts it: by its `other_wins` (by default the anchor kept);
    06's reflection table counts it the same way (`rmlib.reflect.prefers_correct`). NaN where
    the run had no such sample or call; `n_<name>` says how many each rate rests on."""
    roll = rollouts
    parsed = roll[roll["choice"].notna()]
    auc, n_cmp = confidence_auc(roll)
    accuracy = _rate(parsed["correct"])
    rho1, n_rho1 = within_pair_correlation(
        parsed["key"], parsed["correct"].astype(bool), pd.Series(accuracy, index=parsed.index)
    )
    out: dict[str, Any] = {
        "model": model,
        "n_samples": int(n_samples),
        "accuracy": accuracy,
        "parse_rate": _rate(roll["choice"].notna()),
        "confidence_auc": auc,
        "n_auc_comparisons": n_cmp,
        "sample_correlation": rho1,
        "n_sample_correlation": n_rho1,
    }
    g = predictions[predictions["method"] == "greedy"]
    out["greedy_parse_rate"] = _rate(g["verdict"].notna())
    out["greedy_accuracy"] = _rate(g.loc[g["verdict"].notna(), "correct"])
    have = reflections is not None and len(reflections) > 0
    real = reflections[reflections["method"] == "reflectrm"] if have else None
    if real is None or real.empty:
        for name in ("reflection_right", "reflection_wrong", "agree_win", "call_correlation"):
            out[name], out[f"n_{name}"] = math.nan, 0
        return out
    case = [
        _CASES[(bool(a), bool(i))]
        for a, i in zip(real["anchor_correct"], real["i_correct"], strict=True)
    ]
    won = real["other_wins"].astype(bool)
    win_rate = won.groupby(case).mean()
    for name in ("reflection_right", "reflection_wrong", "agree_win"):
        rate = float(win_rate.get(name, math.nan))
        out[name] = 1.0 - rate if name == "reflection_right" else rate
        out[f"n_{name}"] = case.count(name)
    rates = pd.Series([float(win_rate[c]) for c in case], index=real.index)
    out["call_correlation"], out["n_call_correlation"] = within_pair_correlation(
        real["key"], won, rates
    )
    return out


def measured_parameters(cfg: RunConfig, run: RunFolder, model: str) -> dict[str, Any]:
    """The model's parameters as the run measured them for `model` (its stage-1 judge's
    rollouts, its own reflections): `parameters_from_tables` on the run's tables."""
    roll = run.read_table(f"rollouts_{stage1_model(cfg, model)}")
    preds = run.read_table(f"predictions_{model}")
    refl = run.read_table(f"reflections_{model}") if run.has_table(f"reflections_{model}") else None
    return parameters_from_tables(roll, preds, refl, int(cfg.inference.n_samples), model)


# parameters the model needs from the run (the others fall back to JudgeModel's defaults)
REQUIRED = ("accuracy", "confidence_auc", "reflection_right", "reflection_wrong")


def judge_model_of(measured: dict[str, Any]) -> JudgeModel | None:
    """The JudgeModel of measured parameters; None when one of REQUIRED is missing (NaN). An
    AUC of exactly 0 or 1 is clipped to 0.001 / 0.999 (the normal model has no such judge), a
    correlation to [0, 1]."""
    if any(not math.isfinite(float(measured.get(k, math.nan))) for k in REQUIRED):
        return None
    optional = {
        k: float(measured[k])
        for k in ("agree_win", "parse_rate", "greedy_accuracy", "greedy_parse_rate")
        if math.isfinite(float(measured.get(k, math.nan)))
        and (k != "parse_rate" or measured[k] > 0)
    }
    # a measured correlation below 0 (draws that disagree more than chance) or above 1 (noise)
    # has no judge in the model: clipped to [0, 1]; unmeasured (NaN) is independence
    for k in ("sample_correlation", "call_correlation"):
        value = float(measured.get(k, math.nan))
        if math.isfinite(value):
            optional[k] = min(max(value, 0.0), 1.0)
    return JudgeModel(
        accuracy=float(measured["accuracy"]),
        confidence_auc=min(max(float(measured["confidence_auc"]), 0.001), 0.999),
        reflection_right=float(measured["reflection_right"]),
        reflection_wrong=float(measured["reflection_wrong"]),
        n_samples=int(measured["n_samples"]),
        **optional,
    )


def reflection_pays(
    cfg: RunConfig,
    run: RunFolder,
    model: str | None = None,
    *,
    auc_grid: Sequence[float] = AUC_GRID,
    reflection_grid: Sequence[float] = REFLECTION_GRID,
    n_pairs: int = SIM_PAIRS,
    seed: int | None = None,
) -> dict[str, pd.DataFrame]:
    """Notebook 06's map, and the run on it.

    - `map`: `reflection_map` at the run's N and the model's measured stage-1 accuracy (the
      other parameters measured too where the run has them), in two panels: `panel` "same"
      (one reflection accuracy for both cases) and "overrule" (the y axis is the accuracy when
      the anchor is wrong; when it is right, the run's measured value);
    - `run`: one row per method: the accuracy the model predicts from the run's measured
      parameters (`predicted`; `predicted_independent` with both correlations 0) beside the
      accuracy measured (plain accuracy over every judged pair and order, a bootstrap 95 %
      interval over pairs) and whether the prediction falls inside it (`inside`);
    - `parameters`: the measured parameters themselves.

    model: default the headline model (unified when evaluated). seed: default cfg.run.seed.
    Writes metrics.json section `reflection_map`.
    """
    model = model or headline_model(evaluated_models(cfg, run))
    seed = cfg.run.seed if seed is None else seed
    measured = measured_parameters(cfg, run, model)
    fitted = judge_model_of(measured)
    base = fitted or _accuracy_only_judge(measured, int(cfg.inference.n_samples))
    common = {
        "base": base,
        "auc_grid": auc_grid,
        "reflection_grid": reflection_grid,
        "n_pairs": n_pairs,
        "seed": seed,
        "cfg": cfg.inference,
        "failure_credit": cfg.eval.failure_credit,
    }
    n = int(cfg.inference.n_samples)
    panels = [reflection_map(base.accuracy, n, **common).assign(panel="same")]
    if math.isfinite(measured["reflection_right"]):
        keep = float(measured["reflection_right"])
        over = reflection_map(base.accuracy, n, reflection_right=keep, **common)
        panels.append(over.assign(panel="overrule"))
    grid = pd.concat(panels, ignore_index=True)
    sim_kw = {"cfg": cfg.inference, "failure_credit": cfg.eval.failure_credit}
    predicted = simulated_accuracy(fitted, n_pairs, seed, **sim_kw) if fitted else {}
    # the same judge with independent samples and calls: what the correlations change
    independent = (
        simulated_accuracy(
            replace(fitted, sample_correlation=0.0, call_correlation=0.0), n_pairs, seed, **sim_kw
        )
        if fitted
        else {}
    )
    preds = run.read_table(f"predictions_{model}")
    rows = []
    for m in SIM_METHODS:
        p = preds[preds["method"] == m]
        est, low, high = pooled_rate(
            scoring.credited(p, cfg.eval.failure_credit),
            p["id"],
            n_boot=cfg.eval.n_bootstrap,
            seed=cfg.run.seed,
        )
        pred = predicted.get(m, math.nan)
        rows.append(
            {
                "model": model,
                "method": m,
                "predicted": pred,
                "predicted_independent": independent.get(m, math.nan),
                "measured": est,
                "ci_low": low,
                "ci_high": high,
                # NaN compares False: a run the model could not place is not inside
                "inside": bool(low <= pred <= high),
                "n": len(p),
            }
        )
    table = pd.DataFrame(rows)
    params = pd.DataFrame([{**measured, "fitted": fitted is not None}])
    settings = {"n_pairs": n_pairs, "seed": seed, "model": asdict(fitted) if fitted else None}
    run.update_metrics(
        "reflection_map",
        {"run": records(table), "parameters": records(params), "map": records(grid), **settings},
    )
    return {"map": grid, "run": table, "parameters": params}


def _accuracy_only_judge(measured: dict[str, Any], n_samples: int) -> JudgeModel:
    """The judge of a run that measured too little to fit one: its stage-1 accuracy (0.5 when
    unmeasured) and N, every other parameter at the model's default."""
    accuracy = float(measured.get("accuracy", math.nan))
    return JudgeModel(accuracy=accuracy if math.isfinite(accuracy) else 0.5, n_samples=n_samples)


def what_if(cfg: RunConfig, parameters: pd.DataFrame, **changes: Any) -> pd.DataFrame:
    """06's exercise: the model's predictions for the run's measured judge (`parameters`:
    `reflection_pays(...)["parameters"]`) beside the same judge with `changes` (JudgeModel
    fields: reflection_wrong=0.8, call_correlation=1.0, n_samples=16, ...), one row per method
    with the difference. Arithmetic on the model, not a measurement; a field the model does not
    have, or a value out of its range, is one ValueError line."""
    fields = list(JudgeModel.__dataclass_fields__)
    unknown = sorted(set(changes) - set(fields))
    if unknown:
        raise ValueError(f"{', '.join(unknown)}: not a parameter of the model; one of {fields}")
    measured = parameters.iloc[0].to_dict() if len(parameters) else {}
    n_samples = int(cfg.inference.n_samples)
    run_judge = judge_model_of(measured) or _accuracy_only_judge(measured, n_samples)
    changed = replace(run_judge, **changes)
    kw = {"seed": cfg.run.seed, "cfg": cfg.inference, "failure_credit": cfg.eval.failure_credit}
    before, after = simulated_accuracy(run_judge, **kw), simulated_accuracy(changed, **kw)
    return pd.DataFrame(
        {
            "method": list(before),
            "run's judge": list(before.values()),
            "changed": [after[m] for m in before],
            "difference": [after[m] - before[m] for m in before],
        }
    )
