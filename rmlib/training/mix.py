"""Rollouts → the Pref./Refl. training mix (method.md §2), saved as a TRL-ready dataset.

Input: the rollout table of `rmlib.judge.judgments.judge_pairs` (N samples per training pair, from
the backbone that will be trained) and the pairs it judged. Each pair is classified by its samples:

- **easy**: all N verdicts correct → dropped (the paper's rule).
- **mixed**: at least one correct and at least one *parsed wrong* verdict → one Refl. item.
- **all_wrong**: no correct verdict.
- **correct_or_failed**: at least one correct, no parsed wrong verdict, at least one
  unparseable rollout. Only exists with `failure_is_wrong=True` (default).

Unparseable rollouts (method.md leaves this open; a named parameter): with
`failure_is_wrong=True` they count as "not correct", so a pair with 7 correct and 1 unparseable
verdict is not easy (the model did fail on it) and is a Pref. candidate; with False they are
ignored and only parsed verdicts decide (7 correct + 1 unparseable is easy). Either way an
unparseable rollout is never a critique: a Refl. item needs a parsed correct and a parsed wrong
judgment.

Items:
- **Refl.**: one per mixed pair: a correct and a wrong critique of the pair (each drawn at random
  among its kind, seeded per pair), in random order; label = the correct critique's slot.
- **Pref.**: non-easy pairs drawn at random with the human label; a pair may be in both sets.

Counts (`ratio_counts`): the ratio p:r is enforced exactly, as far as integers allow. The mix
takes the largest Refl. count R with R ≤ the mixed pairs (and ≤ max_refl) and R·p/r ≤ the Pref.
pool (the non-easy pairs, and ≤ max_pref), and P = R·p/r rounded (half up) Pref. items. Realistic
rollouts have far more mixed pairs than the Pref. pool can match at 4:1, so Pref. takes the whole
pool and Refl. is subsampled (seeded): 900 non-easy pairs of which 800 mixed give 900 : 225.
Ratio `"1:0"` means Pref. only, every non-easy pair (≤ max_pref). The requested counts (the ratio
and the caps alone; None = no cap), the pools and the obtained counts are all in
`TrainMix.counts` and its table; a warning (logger `rmlib.training.mix`, also `counts["note"]`)
says when the pools or caps made the obtained ratio differ from the requested one.

When the caps and the ratio disagree (`exact`, a named choice): `"ratio"` (the default) keeps the
ratio exact within the caps, so the paper's 13,692 / 3,420 at 4:1 give 13,680 + 3,420;
`"caps"` takes the caps themselves as the counts whenever both pools reach them (13,692 +
3,420 = 17,112, the paper's own draw, 4.004:1), and falls back to the ratio rule within the caps
when a pool is short of its cap. `mix_counts` is the one rule; the dry run (`rmlib.workbook.plan`)
uses it too. The counts table puts the paper's counts (Qwen3-4B, `rmlib.paper.MIX_COUNTS`) beside
ours.

Variants (`TrainMixConfig.variant`), all from the same seeded draws so their Pref. sets nest:
- `mix` (ReflectRM): P Pref. + R Refl. items as above.
- `pref_only` (the paper's RFT baseline): the Pref. items of `mix`, no Refl.
- `pref_same_volume`: Pref. only, as many items as `mix` has in total (P + R, ≤ the pool: when
  the pool is what limits the mix, that is the pool itself, as in `pref_only`).
- `refl_only`: the Refl. items of `mix`, no Pref. (a judge that only reflects).

Prompts are chat messages (`rmlib.judge.prompts.pref_messages` / `refl_messages`), fitted to the
prompt budget by the project's own truncation policy before training (TRL's GRPOConfig has no prompt
cap): Pref. items to its `max_prompt_tokens`, Refl. items to its `max_reflection_prompt_tokens`.
A prompt the budget cuts is stored as the cut message, recovered from the rendered text. How
prompts are shown is the run's (`prompts.critique_with_result`, `model.enable_thinking`), passed
in by the caller and recorded in the provenance: GRPO must render them with the same switch.
"""

from __future__ import annotations

import json
import logging
import math
import random
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any, Literal

import pandas as pd

from rmlib.config import PARAMS, CountOrOff, Seed, doc
from rmlib.data.pair import DataError, Pair
from rmlib.judge import prompts
from rmlib.writes import replacing, unlink_links, write_text

PAIR_CLASSES: tuple[str, ...] = ("easy", "mixed", "all_wrong", "correct_or_failed")
VARIANTS: dict[str, str] = {
    "mix": "Pref. + Refl. at the ratio (ReflectRM's unified training)",
    "pref_only": "the mix's Pref. items only (the paper's RFT baseline)",
    "pref_same_volume": "Pref. only, as many items as the mix holds in total",
    "refl_only": "the mix's Refl. items only (a reflection-only judge)",
}
ROLLOUT_REQUIRED: tuple[str, ...] = ("key", "sample", "text", "choice", "failure")
SENTINEL = "\x00RMLIB-CONTENT\x00"

log = logging.getLogger(__name__)


@dataclass
class TrainMixConfig:
    """How the training mix is built from rollouts; the `mix` section of a params file."""

    __pydantic_config__ = PARAMS

    ratio: str = doc(
        "Pref. : Refl. item ratio 'p:r' (paper: 4:1, best of its 1:0 … 5:1 ablation), enforced "
        "exactly: the largest counts at p:r that the Pref. pool (non-easy pairs), the mixed pairs "
        "and the caps allow (Refl. is subsampled when Pref. is short); '1:0' = Pref. only.",
        "4:1",
    )
    variant: Literal["mix", "pref_only", "pref_same_volume", "refl_only"] = doc(
        "Which set to build: 'mix' (Pref.+Refl.), 'pref_only' (the mix's Pref. items: the "
        "paper's RFT baseline), 'pref_same_volume' (Pref. only, the mix's total volume), "
        "'refl_only' (the mix's Refl. items).",
        "mix",
    )
    max_pref: CountOrOff | None = doc(
        "Cap on Pref. items, met at the ratio (None = no cap; paper: 13,692 for Qwen3-4B).", None
    )
    max_refl: CountOrOff | None = doc(
        "Cap on Refl. items, met at the ratio (None = up to one per mixed pair; paper: 3,420).",
        None,
    )
    exact: Literal["ratio", "caps"] = doc(
        "Which wins when the caps and the ratio disagree: 'ratio' keeps p:r exact within the caps "
        "(caps 13,692 / 3,420 at 4:1 give 13,680 + 3,420); 'caps' takes the caps as the counts "
        "when both pools reach them (13,692 + 3,420: the paper's counts, 4.004:1), else the "
        "'ratio' rule. 'caps' needs both caps set and a ratio with two non-zero parts.",
        "ratio",
    )
    failure_is_wrong: bool = doc(
        "An unparseable rollout counts as not correct when classifying pairs (so a pair with "
        "one is never easy); False ignores unparseable rollouts. Never a critique either way.",
        True,
    )
    seed: Seed | None = doc("Seed of every draw of the mix; None = the run's seed.", None)

    def __post_init__(self) -> None:
        p, r = self.ratio_parts()  # validates
        if self.exact == "caps" and (self.max_pref is None or self.max_refl is None or not p * r):
            raise ValueError(
                "exact: 'caps' needs both max_pref and max_refl set and a ratio with two non-zero "
                f"parts (got max_pref={self.max_pref}, max_refl={self.max_refl}, "
                f"ratio={self.ratio!r})"
            )

    def ratio_parts(self) -> tuple[Fraction, Fraction]:
        """The ratio as (pref, refl) fractions, e.g. '4:1' → (4, 1)."""
        try:
            p, r = (Fraction(x.strip()) for x in str(self.ratio).split(":"))
        except ValueError:
            raise ValueError(f"mix ratio must look like '4:1', got {self.ratio!r}") from None
        if p < 0 or r < 0 or p == r == 0:
            raise ValueError(f"mix ratio parts must be >= 0 and not both 0, got {self.ratio!r}")
        return p, r


@dataclass
class TrainMix:
    """A built training mix: the TRL dataset, per-pair classes, counts and provenance."""

    dataset: Any  # datasets.Dataset
    pair_classes: pd.DataFrame
    counts: dict[str, Any]
    provenance: dict[str, Any] = field(default_factory=dict)

    def counts_table(self) -> pd.DataFrame:
        return counts_table([self.counts])

    def save(self, out_dir: str | Path) -> Path:
        """Write dataset/ (save_to_disk), provenance.json, counts.csv and pair_classes.parquet."""
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        unlink_links(out)  # datasets writes its files by name: never through a link
        self.dataset.save_to_disk(str(out / "dataset"))
        write_text(out / "provenance.json", json.dumps(self.provenance, indent=2, default=str))
        write_text(out / "counts.csv", self.counts_table().to_csv(index=False))
        with replacing(out / "pair_classes.parquet") as tmp:
            self.pair_classes.to_parquet(tmp, index=False)
        return out


# ---------------------------------------------------------------- classification


def classify_pairs(
    rollouts: pd.DataFrame,
    pairs: Sequence[Pair],
    *,
    failure_is_wrong: bool = True,
    table: str = "rollout table",
) -> pd.DataFrame:
    """One row per pair: key, n, n_correct, n_wrong (parsed wrong), n_failed, class.

    Every pair must have the same number of samples N (0..N-1, no duplicates), every rollout
    must belong to a pair, and a rollout's label (when present) must be its pair's: otherwise a
    DataError names the table, the row and the field.
    """
    _check_columns(rollouts, table)
    by_key = {p.key: p for p in pairs}
    counts: dict[str, list[int]] = {k: [0, 0, 0] for k in by_key}
    samples: dict[str, set[int]] = {k: set() for k in by_key}
    for row, r in enumerate(rollouts.itertuples(index=False)):
        pair = by_key.get(r.key)
        if pair is None:
            raise DataError(table, row, "key", f"rollout of unknown pair {r.key!r}", "unknown_pair")
        _check_row(r, pair, samples[r.key], table, row)
        outcome = _outcome(r, pair.label)
        counts[r.key][("correct", "wrong", "failed").index(outcome)] += 1
    n = _common_n(samples, rollouts, table)
    rows = []
    for key, (c, w, f) in counts.items():
        rows.append(
            {
                "key": key,
                "n": n,
                "n_correct": c,
                "n_wrong": w,
                "n_failed": f,
                "class": pair_class(c, w, f, failure_is_wrong=failure_is_wrong),
            }
        )
    return pd.DataFrame(rows, columns=["key", "n", "n_correct", "n_wrong", "n_failed", "class"])


def pair_class(
    n_correct: int, n_wrong: int, n_failed: int, *, failure_is_wrong: bool = True
) -> str:
    """The class of a pair from its counts of correct, parsed-wrong and unparseable rollouts."""
    if n_correct and n_wrong:
        return "mixed"
    if not n_correct:
        return "all_wrong"
    if n_failed and failure_is_wrong:
        return "correct_or_failed"
    return "easy"


def _check_columns(rollouts: pd.DataFrame, table: str) -> None:
    missing = [c for c in ROLLOUT_REQUIRED if c not in rollouts.columns]
    if missing:
        raise DataError(table, None, missing[0], f"missing column(s) {missing}", "missing_column")


def _check_row(r: Any, pair: Pair, seen: set[int], table: str, row: int) -> None:
    sample = int(r.sample)
    if sample in seen:
        raise DataError(table, row, "sample", f"duplicate sample {sample} of {r.key}", "duplicate")
    seen.add(sample)
    label = getattr(r, "label", None)
    if label is not None and not pd.isna(label) and int(label) != pair.label:
        raise DataError(
            table, row, "label", f"label {label} but pair {r.key} has label {pair.label}", "label"
        )
    choice = None if pd.isna(r.choice) else int(r.choice)
    if (choice is None) == (r.failure is None or pd.isna(r.failure)):
        raise DataError(
            table, row, "choice", "exactly one of choice and failure must be set", "verdict"
        )


def _outcome(r: Any, label: int) -> str:
    if r.failure is not None and not pd.isna(r.failure):
        return "failed"
    return "correct" if int(r.choice) == label else "wrong"


def _common_n(samples: dict[str, set[int]], rollouts: pd.DataFrame, table: str) -> int:
    sizes = {k: len(v) for k, v in samples.items()}
    n = max(sizes.values(), default=0)
    for key, size in sizes.items():
        if size != n or samples[key] != set(range(n)):
            rows = rollouts.index[rollouts["key"] == key].tolist()
            raise DataError(
                table,
                rows[0] if rows else None,
                "sample",
                f"pair {key} has samples {sorted(samples[key])}, expected 0..{n - 1}: the rollout "
                "pass is incomplete (rerun it; stored samples are reused)",
                "incomplete",
            )
    return n


# ---------------------------------------------------------------- selection


def select_items(
    classes: pd.DataFrame, cfg: TrainMixConfig, seed: int
) -> tuple[list[str], list[str], dict[str, Any]]:
    """(Pref. pair keys, Refl. pair keys, counts) under cfg; every draw seeded, order-free.

    Counts: `pref`/`refl`/`total` obtained, `pref_pool` (non-easy pairs) and `refl_pool` (mixed
    pairs) available, `pref_requested`/`refl_requested` (what the ratio and caps alone ask for,
    None = as many as the pools allow), `ratio` requested, `ratio_obtained` (of the items built),
    `exact` (which wins when caps and ratio disagree), `variant`, and `note` (why the obtained
    ratio or count differs from the requested one, or ""; also logged as a warning).
    """
    p, r = cfg.ratio_parts()
    pool = sorted(classes.loc[classes["class"] != "easy", "key"])
    mixed = sorted(classes.loc[classes["class"] == "mixed", "key"])
    random.Random(f"{seed}:pref").shuffle(pool)
    random.Random(f"{seed}:refl-pairs").shuffle(mixed)
    want_pref, want_refl = requested_counts(cfg)
    n_pref, n_refl = mix_counts(cfg, len(pool), len(mixed))
    notes = []
    caps_met = cfg.exact == "caps" and (n_pref, n_refl) == (cfg.max_pref, cfg.max_refl)
    if (n_pref * r != n_refl * p and not caps_met) or n_pref + n_refl == 0:
        notes.append(
            f"Pref. : Refl. obtained {n_pref} : {n_refl} ({ratio_text(n_pref, n_refl)}), not the "
            f"requested {cfg.ratio}: Pref. pool {len(pool)} (cap {cfg.max_pref}), mixed pairs "
            f"{len(mixed)} (Refl. cap {cfg.max_refl})"
        )
    if cfg.variant == "pref_only":
        n_refl = want_refl = 0
    elif cfg.variant == "refl_only":
        n_pref = want_pref = 0
    elif cfg.variant == "pref_same_volume":
        want_pref, want_refl = n_pref + n_refl, 0
        n_pref, n_refl = min(want_pref, len(pool)), 0
        if n_pref < want_pref:
            notes.append(f"{n_pref} Pref. items of the mix's {want_pref}: the pool has {len(pool)}")
    note = "; ".join(notes)
    if note:
        log.warning("training mix (%s): %s", cfg.variant, note)
    counts = {
        "pref": n_pref,
        "refl": n_refl,
        "total": n_pref + n_refl,
        "pref_pool": len(pool),
        "refl_pool": len(mixed),
        "pref_requested": want_pref,
        "refl_requested": want_refl,
        "ratio": cfg.ratio,
        "ratio_obtained": ratio_text(n_pref, n_refl),
        "exact": cfg.exact,
        "variant": cfg.variant,
        "note": note,
    }
    return pool[:n_pref], mixed[:n_refl], counts


def requested_counts(cfg: TrainMixConfig) -> tuple[int | None, int | None]:
    """What the ratio and the caps alone ask for (None = as many as the pools allow): with
    exact 'caps' the caps themselves, else the ratio rule's counts within them."""
    if cfg.exact == "caps":
        return cfg.max_pref, cfg.max_refl
    return ratio_counts(*cfg.ratio_parts(), cfg.max_pref, cfg.max_refl)


def mix_counts(cfg: TrainMixConfig, pref_pool: int, refl_pool: int) -> tuple[int, int]:
    """(Pref., Refl.) items of the `mix` variant from pools of `pref_pool` non-easy and
    `refl_pool` mixed pairs: with exact 'caps' the caps when both pools reach them; otherwise
    (and with 'ratio') the largest counts at exactly the ratio within the pools and caps."""
    if (
        cfg.exact == "caps"
        and cfg.max_pref is not None
        and cfg.max_refl is not None
        and pref_pool >= cfg.max_pref
        and refl_pool >= cfg.max_refl
    ):
        return cfg.max_pref, cfg.max_refl
    p, r = cfg.ratio_parts()
    n_pref, n_refl = ratio_counts(
        p, r, _capped(pref_pool, cfg.max_pref), _capped(refl_pool, cfg.max_refl)
    )
    return int(n_pref or 0), int(n_refl or 0)


def ratio_counts(
    p: Fraction, r: Fraction, max_pref: int | None, max_refl: int | None
) -> tuple[int | None, int | None]:
    """The largest (Pref., Refl.) counts at exactly p:r, as far as integers allow, within the
    limits (None = unbounded, which may give None back): Refl. R is the largest with R ≤ max_refl
    and R·p/r ≤ max_pref, Pref. = R·p/r rounded half up (never above max_pref). r = 0 means Pref.
    only (max_pref, 0); p = 0 Refl. only (0, max_refl)."""
    if r == 0:
        return max_pref, 0
    if p == 0:
        return 0, max_refl
    bounds = [] if max_refl is None else [max_refl]
    if max_pref is not None:
        bounds.append(math.floor(max_pref * r / p))
    if not bounds:
        return None, None
    refl = min(bounds)
    return math.floor(refl * p / r + Fraction(1, 2)), refl


def ratio_text(pref: int, refl: int) -> str:
    """Pref. : Refl. counts as a reduced ratio: (900, 225) → '4:1', (7, 3) → '7:3', (5, 0) →
    '1:0', (0, 0) → '0:0'; a denominator above 10 is written as a decimal, '4.01:1'."""
    if refl == 0:
        return "1:0" if pref else "0:0"
    f = Fraction(pref, refl)
    return f"{f.numerator}:{f.denominator}" if f.denominator <= 10 else f"{float(f):.2f}:1"


def _capped(n: int, limit: int | None) -> int:
    return n if limit is None else min(n, limit)


def pick_critiques(rollouts: pd.DataFrame, pair: Pair, seed: int) -> tuple[int, int, int]:
    """(sample in slot 1, sample in slot 2, label = the correct critique's slot), mixed pair."""
    rows = rollouts[rollouts["key"] == pair.key]
    parsed = rows[rows["failure"].isna()]
    correct = sorted(int(s) for s in parsed.loc[parsed["choice"] == pair.label, "sample"])
    wrong = sorted(int(s) for s in parsed.loc[parsed["choice"] != pair.label, "sample"])
    if not correct or not wrong:
        raise ValueError(f"pair {pair.key} is not mixed: no parsed correct and wrong critique")
    rng = random.Random(f"{seed}:refl:{pair.key}")
    good, bad = rng.choice(correct), rng.choice(wrong)
    slot = rng.choice((1, 2))
    return (good, bad, 1) if slot == 1 else (bad, good, 2)


# ---------------------------------------------------------------- prompts


def fitted_messages(
    fmt: prompts.PromptFormat, messages: list[dict[str, str]], fitted: Any
) -> list[dict]:
    """The messages whose rendering is `fitted.text` (a `prompts.Prompt` after the budget policy).

    Untruncated prompts are the messages themselves. A truncated one is recovered from the
    rendered text: the chat template is rendered around a sentinel to find what surrounds the
    content, and the result is checked to render back to exactly the fitted text. `fmt` must be
    the format `fitted` was rendered with.
    """
    if not fitted.truncated:
        return messages
    if len(messages) != 1 or messages[0]["role"] != "user":
        raise ValueError("only single user-message prompts can be recovered after truncation")

    render = fmt.render
    shell = render([{"role": "user", "content": SENTINEL}])
    head, _, tail = shell.partition(SENTINEL)
    text = fitted.text
    if not (text.startswith(head) and text.endswith(tail)):
        raise ValueError("the chat template does not embed the prompt verbatim")
    out = [{"role": "user", "content": text[len(head) : len(text) - len(tail)]}]
    if render(out) != text:
        raise ValueError("recovered truncated prompt does not render back to the fitted text")
    return out


def pref_item(fmt: prompts.PromptFormat, pair: Pair) -> dict[str, Any]:
    """A Pref. item: the pair's judgment prompt fitted to the budget's Pref. limit."""
    fitted = fmt.pref(pair)
    messages = fitted_messages(fmt, prompts.pref_messages(pair), fitted)
    return _item(pair, "pref", pair.label, messages, fitted, -1, -1)


def refl_item(
    fmt: prompts.PromptFormat, pair: Pair, texts: dict[int, str], picks: tuple[int, int, int]
) -> dict[str, Any]:
    """A Refl. item: the picked critiques' prompt fitted to the budget's reflection limit."""
    s1, s2, label = picks
    c1, c2 = texts[s1], texts[s2]
    fitted = fmt.refl(pair, c1, c2)
    messages = fitted_messages(fmt, fmt.refl_messages(pair, c1, c2), fitted)
    return _item(pair, "refl", label, messages, fitted, s1, s2)


def _item(
    pair: Pair, task: str, label: int, messages: list, fitted: Any, s1: int, s2: int
) -> dict[str, Any]:
    return {
        "prompt": messages,
        "task": task,
        "label": int(label),
        "pair_key": pair.key,
        "id": pair.id,
        "source": pair.source,
        "subset": pair.subset,
        "prompt_tokens": int(fitted.n_tokens),
        "truncated_prompt": bool(fitted.truncated),
        "critique1_sample": int(s1),
        "critique2_sample": int(s2),
    }


# ---------------------------------------------------------------- the mix


def build_mix(
    rollouts: pd.DataFrame,
    pairs: Sequence[Pair],
    fmt: prompts.PromptFormat,
    cfg: TrainMixConfig | None = None,
    *,
    seed: int = 0,
    backbone: str = "",
    table: str = "rollout table",
) -> TrainMix:
    """Classify the pairs, draw the Pref./Refl. items and render them into a TRL dataset.

    `seed` is used when cfg.seed is None (the run's seed). `backbone` names the model whose
    rollouts these are (provenance only). Items are shuffled together (seeded), so Pref. and
    Refl. items share batches. `fmt` is the run's prompt format (`PromptFormat.of`: its
    budget, critique_with_result and enable_thinking): inference must show prompts alike.
    """
    from datasets import Dataset

    cfg = cfg or TrainMixConfig()
    seed = cfg.seed if cfg.seed is not None else seed
    classes = classify_pairs(rollouts, pairs, failure_is_wrong=cfg.failure_is_wrong, table=table)
    pref_keys, refl_keys, selected = select_items(classes, cfg, seed)
    by_key = {p.key: p for p in pairs}
    items = [pref_item(fmt, by_key[k]) for k in pref_keys]
    groups = dict(list(rollouts[rollouts["key"].isin(set(refl_keys))].groupby("key")))
    for key in refl_keys:
        rows = groups[key]
        texts = {int(s): t for s, t in zip(rows["sample"], rows["text"], strict=True)}
        picks = pick_critiques(rows, by_key[key], seed)
        items.append(refl_item(fmt, by_key[key], texts, picks))
    random.Random(f"{seed}:order").shuffle(items)
    counts = _counts(classes, selected, backbone)
    provenance = {
        "sources": sorted({p.source for p in pairs}),
        "backbone": backbone,
        "n_samples": counts["n_samples"],
        "seed": seed,
        "ratio": cfg.ratio,
        "variant": cfg.variant,
        "config": asdict(cfg),
        "budget": asdict(fmt.budget),
        **fmt.shown(),
        "prompt_version": prompts.PROMPT_VERSION,
        "counts": counts,
    }
    dataset = Dataset.from_list(items) if items else Dataset.from_dict({"prompt": []})
    return TrainMix(dataset, classes, counts, provenance)


def _counts(classes: pd.DataFrame, selected: dict[str, Any], backbone: str) -> dict[str, Any]:
    per_class = classes["class"].value_counts()
    counts = {
        "backbone": backbone,
        "n_pairs": len(classes),
        "n_samples": int(classes["n"].iloc[0]) if len(classes) else 0,
    }
    counts.update({c: int(per_class.get(c, 0)) for c in PAIR_CLASSES})
    counts.update(selected)
    return counts


def counts_table(rows: Sequence[dict[str, Any]]) -> pd.DataFrame:
    """The paper's data-table layout: one row per mix (backbone, variant) with the ratio requested
    and obtained and which of ratio and caps wins when they disagree (`exact`), then for Pref.
    and Refl. the pool (non-easy / mixed pairs), the count requested (ratio and caps alone;
    <NA> = as many as the pools allow) and the count obtained, their Sum,
    the paper's counts for the same variant beside them (Qwen3-4B, `rmlib.paper.MIX_COUNTS`;
    <NA> where the paper states none), and how many pairs were easy, mixed and all-wrong (plus
    correct-or-failed)."""
    out = [
        {
            "backbone": c.get("backbone", ""),
            "variant": c["variant"],
            "ratio requested": c["ratio"],
            "ratio obtained": c["ratio_obtained"],
            "exact": c.get("exact", "ratio"),
            "Pref. pool": c["pref_pool"],
            "Pref. requested": c["pref_requested"],
            "Pref.": c["pref"],
            "Refl. pool": c["refl_pool"],
            "Refl. requested": c["refl_requested"],
            "Refl.": c["refl"],
            "Sum": c["total"],
            **_paper_counts(c["variant"]),
            "pairs": c["n_pairs"],
            "N": c["n_samples"],
            "easy": c["easy"],
            "mixed": c["mixed"],
            "all-wrong": c["all_wrong"],
            "correct+failed": c["correct_or_failed"],
        }
        for c in rows
    ]
    table = pd.DataFrame(out)
    nullable = ["Pref. requested", "Refl. requested", *PAPER_COLUMNS]
    return table.astype(dict.fromkeys(nullable, "Int64")) if out else table


PAPER_COLUMNS: tuple[str, ...] = ("paper Pref.", "paper Refl.", "paper Sum")


def _paper_counts(variant: str) -> dict[str, int | None]:
    """The paper's Pref., Refl. and Sum for a variant (Qwen3-4B; None where not stated)."""
    from rmlib.paper import MIX_COUNTS

    c = MIX_COUNTS.get(variant, {})
    pref, refl = c.get("pref"), c.get("refl")
    total = None if pref is None or refl is None else pref + refl
    return dict(zip(PAPER_COLUMNS, (pref, refl, total), strict=True))


def load_mix(path: str | Path) -> tuple[Any, dict[str, Any]]:
    """(dataset, provenance) of a mix saved with TrainMix.save."""
    from datasets import load_from_disk

    root = Path(path)
    if not (root / "dataset").is_dir():
        raise FileNotFoundError(f"{root}: no dataset/ folder: not a saved training mix")
    provenance = json.loads((root / "provenance.json").read_text())
    return load_from_disk(str(root / "dataset")), provenance
